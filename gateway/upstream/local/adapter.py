"""``provider = "local"``: an in-process upstream on llama-cpp-python.

Each model entry names a GGUF (``local_model``: an installer id such as ``qwen2.5-0.5b``
or a file path). Generation runs in a worker thread per request; the model's lock
serializes requests to one model, so the event loop never blocks and never interleaves two
generations on one llama.cpp context. ``constrained = true`` adds a JSON-schema grammar (the
enforcement loop sets it for a correction call too, see ``correction_model``); either way
the gateway validates what comes back.

Example::

    upstream = LocalUpstream(env=settings.env)
    response = await upstream.complete(request, model_config)
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.canonical import (
    ChatRequest,
    ChatResponse,
    Finish,
    FinishReason,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageReport,
)
from gateway.errors import GatewayError, InvalidRequest, UpstreamError, UpstreamTimeout
from gateway.settings import ModelConfig
from gateway.upstream.base import TokenCount
from gateway.upstream.local.catalog import LocalModelError, resolve_model_path
from gateway.upstream.local.engine import (
    Cancelled,
    ContextOverflow,
    Generation,
    LocalEngine,
    RuntimeMissing,
)
from gateway.upstream.local.render import TemplateRenderError, offered_tools
from gateway.upstream.local.split import EventSplitter

DEFAULT_N_CTX = 4096
DEFAULT_N_THREADS = 1


@dataclass(frozen=True, slots=True)
class _Done:
    generation: Generation


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


_Item = str | _Done | _Failed


def _translate(exc: BaseException) -> GatewayError:
    if isinstance(exc, GatewayError):
        return exc
    if isinstance(exc, ContextOverflow):
        return InvalidRequest(str(exc), code="context_length_exceeded", param="messages")
    if isinstance(exc, RuntimeMissing | LocalModelError | ImportError):
        return UpstreamError(str(exc), code="local_model_unavailable")
    if isinstance(exc, TemplateRenderError):
        return InvalidRequest(str(exc), code="invalid_request", param="messages")
    return UpstreamError(f"local model failed: {type(exc).__name__}: {exc}")


class LocalUpstream:
    """The Upstream Protocol over in-process GGUF models, one engine per model file."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        n_threads: int | None = None,
        n_ctx: int | None = None,
    ) -> None:
        self._env = dict(env or {})
        threads = n_threads or int(self._env.get("SYNTIC_LOCAL_THREADS", DEFAULT_N_THREADS))
        self._n_threads = max(1, threads)
        self._n_ctx = n_ctx or int(self._env.get("SYNTIC_LOCAL_CTX", DEFAULT_N_CTX))
        self._engines: dict[Path, LocalEngine] = {}
        self._engines_lock = threading.Lock()

    def engine(self, model: ModelConfig) -> LocalEngine:
        """The (lazily loading) engine for ``model``; one per GGUF file."""
        path = resolve_model_path(model.local_model or model.upstream_model, self._env)
        with self._engines_lock:
            engine = self._engines.get(path)
            if engine is None:
                engine = LocalEngine(path, n_ctx=self._n_ctx, n_threads=self._n_threads)
                self._engines[path] = engine
            return engine

    async def complete(self, request: ChatRequest, model: ModelConfig) -> ChatResponse:
        text: list[str] = []
        calls: dict[int, list[str]] = {}
        heads: dict[int, ToolCallStart] = {}
        finish: FinishReason = "stop"
        usage = Usage()
        async for event in self.stream(request, model):
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, ToolCallStart):
                heads[event.index] = event
                calls[event.index] = []
            elif isinstance(event, ToolCallDelta):
                calls[event.index].append(event.arguments)
            elif isinstance(event, Finish):
                finish = event.reason
            elif isinstance(event, UsageReport):
                usage = event.usage
        tool_calls = tuple(
            ToolCall(id=heads[i].id, name=heads[i].name, raw_arguments="".join(calls[i]))
            for i in sorted(heads)
        )
        return ChatResponse(
            id=f"chatcmpl-{secrets.token_hex(12)}",
            model=model.upstream_model,
            content="".join(text) or None,
            tool_calls=tool_calls,
            finish_reason=finish,
            usage=usage,
            created=int(time.time()),
        )

    async def stream(self, request: ChatRequest, model: ModelConfig) -> AsyncIterator[StreamEvent]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        cancel = threading.Event()

        def put(item: _Item) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: nobody is listening any more
                cancel.set()

        def work() -> None:
            try:
                engine = self.engine(model)
                generation = engine.generate(
                    request, constrained=model.constrained, on_text=put, cancel=cancel
                )
            except Cancelled:
                return
            except Exception as exc:  # crosses the thread boundary, translated below
                put(_Failed(exc))
                return
            put(_Done(generation))

        splitter = EventSplitter([t.name for t in offered_tools(request)])
        thread = threading.Thread(target=work, name="syntic-local-gen", daemon=True)
        thread.start()
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), timeout=model.timeout_s)
                except TimeoutError as exc:
                    raise UpstreamTimeout(
                        f"local model {model.name} produced nothing for {model.timeout_s:g}s"
                    ) from exc
                if isinstance(item, str):
                    for event in splitter.feed(item):
                        yield event
                elif isinstance(item, _Failed):
                    raise _translate(item.error) from item.error
                else:
                    for event in splitter.finish():
                        yield event
                    yield Finish(self._finish_reason(item.generation, splitter.call_count))
                    yield UsageReport(
                        Usage(item.generation.prompt_tokens, item.generation.completion_tokens)
                    )
                    return
        finally:
            cancel.set()

    async def count_tokens(
        self, request: ChatRequest, body: Mapping[str, Any], model: ModelConfig
    ) -> TokenCount:
        """Exact: the model's own template and tokenizer (``LocalEngine.count_tokens``)."""
        try:
            tokens = await asyncio.to_thread(self.engine(model).count_tokens, request)
        except Exception as exc:  # the runtime's, translated once here
            raise _translate(exc) from exc
        return TokenCount(tokens, "tokenizer")

    @staticmethod
    def _finish_reason(generation: Generation, calls: int) -> FinishReason:
        if generation.finish == "length":
            return "length"
        return "tool_calls" if calls else "stop"

    async def aclose(self) -> None:
        """Drop the loaded models (they are freed once no generation holds them)."""
        with self._engines_lock:
            self._engines.clear()
