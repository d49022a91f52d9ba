"""One loaded GGUF model on llama-cpp-python, used from worker threads.

Loading is lazy (the first request pays for it) and every generation holds the model's
lock: llama.cpp contexts are not re-entrant, so requests to one model are serialized
Runs in a plain thread, never on the event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gateway.canonical import ChatRequest
from gateway.upstream.local.grammar import build_grammar
from gateway.upstream.local.parse import CLOSE_TAG
from gateway.upstream.local.render import Prompt, render_prompt

DEFAULT_MAX_TOKENS = 512
DEFAULT_TEMPERATURE = 0.7
_END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>")


class RuntimeMissing(RuntimeError):
    """llama-cpp-python is not installed."""


class ContextOverflow(ValueError):
    """The rendered prompt does not fit the model's context window."""


class Cancelled(Exception):
    """The consumer went away; generation stopped early."""


@dataclass(frozen=True, slots=True)
class Generation:
    """What one call produced: the model's text (prefill included), why it stopped, and the
    token counts (the prefill is part of the prompt, not the completion)."""

    text: str
    finish: Literal["stop", "length"]
    prompt_tokens: int
    completion_tokens: int
    constrained: bool


def load_runtime() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise RuntimeMissing(
            "the local model runtime is not installed: run scripts/build-local-runtime "
            "(or pip install -e '.[local]')"
        ) from exc
    return llama_cpp


class LocalEngine:
    """A lazily loaded model plus the lock that serializes its use."""

    def __init__(self, path: Path, *, n_ctx: int = 4096, n_threads: int = 1) -> None:
        self.path = path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.lock = threading.Lock()
        self._llm: Any = None
        self._template: str | None = None

    @property
    def loaded(self) -> bool:
        return self._llm is not None

    def _ensure_loaded(self) -> Any:
        if self._llm is None:
            runtime = load_runtime()
            self._llm = runtime.Llama(
                model_path=str(self.path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                verbose=False,
            )
            self._template = self._llm.metadata.get("tokenizer.chat_template")
        return self._llm

    def prompt_for(self, request: ChatRequest, *, constrained: bool = False) -> Prompt:
        """Render ``request`` with this model's template (loads the model). Lock held."""
        llm = self._ensure_loaded()
        special = {
            "bos_token": llm.detokenize([llm.token_bos()], special=True).decode("utf-8", "replace")
            if llm.token_bos() >= 0
            else "",
            "eos_token": llm.detokenize([llm.token_eos()], special=True).decode("utf-8", "replace")
            if llm.token_eos() >= 0
            else "",
        }
        return render_prompt(self._template, request, special=special, open_object=not constrained)

    def count_tokens(self, request: ChatRequest) -> int:
        """The prompt's tokens as generation would feed them: rendered with the model's
        template, tokenized by the model (loads it). Takes the model's lock."""
        with self.lock:
            prompt = self.prompt_for(request, constrained=False)
            text = prompt.text.encode("utf-8")
            return len(self._llm.tokenize(text, add_bos=False, special=True))

    def _grammar(self, request: ChatRequest, runtime: Any) -> Any:
        """The request's grammar, checked with llama.cpp's own parser first: handing it a
        grammar it cannot parse crashes the process, so a bad one degrades to the loose
        grammar, then to free generation (the gateway validates either way)."""
        convert = runtime.llama_grammar.json_schema_to_gbnf
        for loose in (False, True):
            try:
                gbnf = build_grammar(request, convert, loose=loose)
            except Exception:  # the converter raises bare Exceptions on odd schemas
                continue
            if gbnf is None:
                return None
            if self._parses(runtime, gbnf):
                return runtime.LlamaGrammar.from_string(gbnf, verbose=False)
        return None

    def _parses(self, runtime: Any, gbnf: str) -> bool:
        vocab = runtime.llama_model_get_vocab(self._llm.model)
        sampler = runtime.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
        if not sampler:
            return False
        runtime.llama_sampler_free(sampler)
        return True

    def generate(
        self,
        request: ChatRequest,
        *,
        constrained: bool,
        on_text: Callable[[str], None],
        cancel: threading.Event,
    ) -> Generation:
        """Render, then generate, calling ``on_text`` with each new piece of text (the
        prefill first). Takes the model's lock for the whole call."""
        with self.lock:
            if cancel.is_set():
                raise Cancelled()
            prompt = self.prompt_for(request, constrained=constrained)
            return self._generate_locked(request, prompt, constrained, on_text, cancel)

    def _generate_locked(
        self,
        request: ChatRequest,
        prompt: Prompt,
        constrained: bool,
        on_text: Callable[[str], None],
        cancel: threading.Event,
    ) -> Generation:
        llm = self._llm
        runtime = load_runtime()
        prompt_tokens = len(llm.tokenize(prompt.text.encode("utf-8"), add_bos=False, special=True))
        if prompt_tokens >= self.n_ctx:
            raise ContextOverflow(
                f"the prompt is {prompt_tokens} tokens; this model's context is {self.n_ctx}"
            )
        grammar = self._grammar(request, runtime) if constrained else None

        def stop_check(_ids: Any, _logits: Any) -> bool:
            return cancel.is_set()

        stops = list(_END_MARKERS)
        if request.tool_choice is not None and not isinstance(request.tool_choice, str):
            stops.append(CLOSE_TAG)  # a forced call is one call: stop once it is closed
        stops.extend(request.stop)
        max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
        max_tokens = min(max_tokens, self.n_ctx - prompt_tokens)
        if prompt.prefill:
            on_text(prompt.prefill)
        chunks = llm.create_completion(
            prompt.text,
            max_tokens=max_tokens,
            temperature=(
                DEFAULT_TEMPERATURE if request.temperature is None else request.temperature
            ),
            top_p=1.0 if request.top_p is None else request.top_p,
            stop=stops,
            stream=True,
            grammar=grammar,
            stopping_criteria=runtime.StoppingCriteriaList([stop_check]),
        )
        pieces: list[str] = [prompt.prefill]
        finish: Literal["stop", "length"] = "stop"
        for chunk in chunks:
            choice = chunk["choices"][0]
            text = choice.get("text") or ""
            if text:
                pieces.append(text)
                on_text(text)
            if choice.get("finish_reason") == "length":
                finish = "length"
        if cancel.is_set():
            raise Cancelled()
        generated = "".join(pieces[1:])
        if finish == "length":
            completion_tokens = max_tokens  # llama.cpp stopped at exactly this many
        else:  # the text (stop sequence cut off) re-tokenizes to what was sampled
            completion_tokens = len(
                llm.tokenize(generated.encode("utf-8"), add_bos=False, special=True)
            )
        return Generation(
            text=prompt.prefill + generated,
            finish=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            constrained=grammar is not None,
        )
