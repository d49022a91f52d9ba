"""Syntic gateway: strict tool-call arguments for OpenAI- and Anthropic-style APIs."""
