"""The OpenAI chat-completions dialect: ``POST /v1/chat/completions``."""

from __future__ import annotations

from gateway.dialects.openai.decode import decode_chat_request
from gateway.dialects.openai.encode import encode_chat_response
from gateway.dialects.openai.endpoint import chat_completions

__all__ = ["chat_completions", "decode_chat_request", "encode_chat_response"]
