"""The embedded model's engine: one loaded ``Llama`` with its chat template.

Runs only inside the worker process (:mod:`retinue.llm._local_worker`), so a native crash in
llama.cpp never takes the agent down with it. Imports ``llama_cpp`` at module level for that
reason: the parent process never imports this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from llama_cpp import (  # pyright: ignore[reportMissingImports]
    Llama,
    LlamaGrammar,
    StoppingCriteriaList,
)
from llama_cpp.llama_chat_format import (  # pyright: ignore[reportMissingImports]
    Jinja2ChatFormatter,
)

from retinue.errors import ContextTooLongError, ModelError
from retinue.llm._grammar import tool_call_grammar

__all__ = ["Engine", "GenerateRequest"]

_BLANK_RUN = "\n\n\n\n"
_REPORT_EVERY = 0.5  # seconds between tokens/s reports

Emit = Callable[[dict[str, Any]], None]
"""Sends one event to the parent (text deltas and progress)."""


@dataclass(slots=True)
class GenerateRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    max_tokens: int
    temperature: float
    seed: int
    constrain: bool = True

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> GenerateRequest:
        return cls(
            messages=list(data["messages"]),
            tools=list(data.get("tools") or []),
            max_tokens=int(data["max_tokens"]),
            temperature=float(data["temperature"]),
            seed=int(data["seed"]),
            constrain=bool(data.get("constrain", True)),
        )


def _stops(template_stops: str | list[str] | None) -> list[str]:
    """The template's stop strings, and a run of blank lines (a small model's degenerate loop)."""
    if template_stops is None:
        stops = []
    elif isinstance(template_stops, str):
        stops = [template_stops]
    else:
        stops = list(template_stops)
    return [*stops, _BLANK_RUN]


class Engine:
    """A loaded model. Not thread-safe: the worker runs one generation at a time."""

    def __init__(self, path: str, n_ctx: int, n_threads: int) -> None:
        try:
            self.llm = Llama(path, n_ctx=n_ctx, n_threads=n_threads, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"cannot load the local model {path}: {exc}") from None
        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelError(f"{path} has no chat template")
        self.formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=self._token_text(self.llm.token_eos()),
            bos_token=self._token_text(self.llm.token_bos()),
        )
        self._grammars: dict[str, Any] = {}

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", "replace")

    def _grammar(self, tools: list[dict[str, Any]]) -> Any:
        """The grammar for these tools (built once per tool set): an answer or a valid call."""
        source = tool_call_grammar(tools)
        grammar = self._grammars.get(source)
        if grammar is None:
            try:
                grammar = LlamaGrammar.from_string(source, verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"cannot build the tool-call grammar: {exc}") from None
            self._grammars = {source: grammar}  # one tool set at a time is the common case
        return grammar

    def generate(
        self, request: GenerateRequest, emit: Emit, cancelled: Callable[[], bool]
    ) -> dict[str, Any]:
        """Generate a reply; returns its raw text, token counts and finish reason."""
        try:
            formatted = self.formatter(
                messages=request.messages,  # type: ignore[arg-type]
                tools=request.tools or None,  # type: ignore[arg-type]
            )
        except Exception as exc:
            raise ModelError(f"cannot render the local model's chat template: {exc}") from None
        prompt = self.llm.tokenize(formatted.prompt.encode(), add_bos=False, special=True)
        n_ctx = self.llm.n_ctx()
        if len(prompt) >= n_ctx:
            raise ContextTooLongError(
                f"the prompt has {len(prompt)} tokens; the local model's context window is "
                f"{n_ctx} (n_ctx)"
            )
        grammar = self._grammar(request.tools) if request.tools and request.constrain else None
        emit({"progress": "prompt", "prompt_tokens": len(prompt)})
        started = time.monotonic()
        first: float | None = None
        reported = started
        pieces: list[str] = []
        finish = "stop"
        stop_when = StoppingCriteriaList([lambda _ids, _logits: cancelled()])
        try:
            stream = self.llm.create_completion(
                prompt,
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                seed=request.seed,
                stop=_stops(formatted.stop),
                stream=True,
                stopping_criteria=stop_when,
                grammar=grammar,
            )
            for chunk in cast("Iterator[Any]", stream):
                choice = chunk["choices"][0]
                finish = choice.get("finish_reason") or finish
                text = choice["text"]
                now = time.monotonic()
                if first is None:
                    first = reported = now
                    emit({"progress": "generating", "prompt_seconds": first - started})
                elif now - reported >= _REPORT_EVERY:
                    reported = now
                    emit({"progress": "generating", "tokens": len(pieces), "seconds": now - first})
                pieces.append(text)
                if text:
                    emit({"text": text})
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"local model failed: {exc}") from None
        text = "".join(pieces)
        generated = len(self.llm.tokenize(text.encode(), add_bos=False, special=True))
        now = time.monotonic()
        return {
            "text": text,
            "input_tokens": len(prompt),
            "output_tokens": generated,
            "finish": "cancelled" if cancelled() else finish,
            "prompt_seconds": (first or now) - started,
            "generate_seconds": now - (first or now),
        }

    def close(self) -> None:
        self.llm.close()
