"""The embedded model's engine: one loaded ``Llama`` with its chat template.

Runs only inside the worker process (:mod:`retinue.llm._local_worker`), so a native crash in
llama.cpp never takes the agent down with it. Imports ``llama_cpp`` at module level for that
reason: the parent process never imports this module.

With tools offered, a request is answered in the tool format its model's profile names
(``format``, see :mod:`retinue.llm.profiles`): ``steps`` (:meth:`Engine.generate`'s two short
constrained steps) or ``native`` (:meth:`Engine._native`: the template's tool section, free
text, and grammars only inside a call the model opens).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from llama_cpp import (  # pyright: ignore[reportMissingImports]
    Llama,
    LlamaGrammar,
    StoppingCriteriaList,
    llama_sampler_free,
    llama_sampler_init_grammar,
)
from llama_cpp.llama_chat_format import (  # pyright: ignore[reportMissingImports]
    Jinja2ChatFormatter,
)

from retinue.errors import ContextTooLongError, ModelError
from retinue.llm._grammar import (
    ANSWER,
    ANSWER_GRAMMAR,
    NO_OPTION,
    arguments_grammar,
    call_name_grammar,
    call_prefix,
    choice_grammar,
    option_grammar,
    optional_parameters,
)

__all__ = ["Engine", "GenerateRequest", "grammar_parses"]

_BLANK_RUN = "\n\n\n\n"
_REPORT_EVERY = 0.5  # seconds between tokens/s reports
_GRAMMAR_CACHE = 32
_EXAMPLES = (  # kinds of request, not the words of any benchmark task
    ("What is 7 times 6?", ANSWER),
    ("Show me what main.py does", "Read"),
    ("Explain what a closure is", ANSWER),
    ("Fix the typo in utils.py", "Edit"),
    ("Make a file todo.md listing three chores", "Write"),
    ("Thanks!", ANSWER),
    ("Run the tests", "Bash"),
    ("Which files mention TODO?", "Grep"),
    ("Have the tester check parser.py", "SubAgent"),
    ("We are done with the tester session", "UnloadSubAgent"),
)
_RESULTS = "<tool_response>"  # how a small model is shown tool results (local.py)
_OPEN_CALL = "<tool_call>"  # how the model opens a call in its own (native) format
_CALL_NAME_TOKENS = 48  # a call's name and JSON up to its arguments
_REQUEST_CHARS = 400  # of the user's request, repeated before a call's arguments

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
    format: str = "steps"
    """``steps`` or ``native`` (:data:`retinue.llm.profiles.TOOL_FORMATS`)."""

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> GenerateRequest:
        return cls(
            messages=list(data["messages"]),
            tools=list(data.get("tools") or []),
            max_tokens=int(data["max_tokens"]),
            temperature=float(data["temperature"]),
            seed=int(data["seed"]),
            constrain=bool(data.get("constrain", True)),
            format=str(data.get("format") or "steps"),
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


def _with_steps(
    messages: list[dict[str, Any]], functions: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """``messages`` with the step list added to the system prompt (or, without one, at the
    start of the first user message): the model starts every reply with one word naming its
    next step (``answer`` or a tool). Asked there, before the
    conversation, a small model reads the user's message last and decides on it; asked after
    the message, it names the first tool of the list whatever the message was (measured).
    Every step of a reply then shares this prompt's start, so llama.cpp evaluates it once."""
    lines = "\n".join(
        f"- {name}: {_first_line(f.get('description', ''))}" for name, f in functions.items()
    )
    examples = "\n".join(
        f'"{request}" -> {step}'
        for request, step in _EXAMPLES
        if step == ANSWER or step in functions
    )
    steps = (
        "Start every reply with one word that names your next step, on a line of its own:\n"
        f"- {ANSWER}: you reply in words now (questions, facts, maths, explanations, "
        f"greetings); your reply follows on the next line\n{lines}\nExamples:\n{examples}"
    )
    first = messages[0] if messages else None
    if (
        first is None
        or first.get("role") not in ("system", "user")
        or not isinstance(first.get("content") or "", str)
    ):
        return [{"role": "system", "content": steps}, *messages]
    if first.get("role") == "system":
        return [{**first, "content": f"{first.get('content') or ''}\n\n{steps}"}, *messages[1:]]
    # no system prompt: the steps open the first message, so no role is added (some chat
    # templates refuse a system message, others a second user message in a row)
    return [{**first, "content": f"{steps}\n\n{first.get('content') or ''}"}, *messages[1:]]


def _after_tool_results(messages: list[dict[str, Any]]) -> bool:
    last = messages[-1] if messages else {}
    content = last.get("content")
    return last.get("role") == "tool" or (
        last.get("role") == "user" and isinstance(content, str) and content.startswith(_RESULTS)
    )


def _arguments_prompt(
    function: dict[str, Any], messages: list[dict[str, Any]], given: tuple[str, ...] = ()
) -> str:
    """What the model reads before it writes a call's arguments.

    One line per parameter the call gives (the required ones, then the optional ones in
    ``given``) with what it means, then the request again: a small model copies text it has
    just read into the values (a description, a schema's example), and takes what the user
    asked for only when it is the last thing it read.
    """
    props = _properties(function)
    required = [n for n in function.get("parameters", {}).get("required") or [] if n in props]
    lines = [f"Call {function['name']} now. Its arguments are one JSON object:"]
    for name in [*required, *(n for n in given if n in props and n not in required)]:
        prop = props[name] if isinstance(props[name], dict) else {}
        about = prop.get("description")
        meaning = f" - {about}" if isinstance(about, str) and about else ""
        lines.append(f'- "{name}" ({_kind(prop)}){meaning}')
    lines.append("Take the values from the request and the conversation, not from this list.")
    request = _last_request(messages)
    if request:
        lines.append(f"The request: {request}")
    return "\n".join(lines)


def _options_prompt(
    function: dict[str, Any], optional: list[str], messages: list[dict[str, Any]]
) -> str:
    """The question before the arguments of a tool with optional parameters: which one, if
    any, the request needs (one word; :data:`NO_OPTION` first)."""
    props = _properties(function)
    listed = ", ".join(f'"{n}" ({_kind(props.get(n))})' for n in optional)
    lines = [
        f"Before you call {function['name']}: does the request need one of its optional "
        f"arguments {listed}? Reply with one word: {NO_OPTION} (the usual answer), or the "
        "name of the one it needs."
    ]
    request = _last_request(messages)
    if request:
        lines.append(f"The request: {request}")
    return "\n".join(lines)


def _properties(function: dict[str, Any]) -> dict[str, Any]:
    params = function.get("parameters") or {}
    props = params.get("properties") if isinstance(params, dict) else None
    return props if isinstance(props, dict) else {}


def _kind(prop: Any) -> str:
    """A parameter's type in a few words: ``string``, ``one of "a", "b"``, ``JSON array``."""
    if not isinstance(prop, dict):
        return "any JSON value"
    if isinstance(prop.get("enum"), list):
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in prop["enum"])
    kind = prop.get("type")
    if isinstance(kind, str) and kind in ("array", "object"):
        return f"JSON {kind}"
    if isinstance(kind, str):
        return kind
    options = [o for o in prop.get("anyOf") or [] if isinstance(o, dict) and "type" in o]
    kinds = [str(o["type"]) for o in options if o["type"] != "null"]
    return " or ".join(kinds) if kinds else "any JSON value"


def _last_request(messages: list[dict[str, Any]], limit: int = _REQUEST_CHARS) -> str:
    """The user's own words in their last message: its first paragraph (not the file contents
    the compact prompt appends, nor tool results), cut to ``limit`` characters."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, str):
            continue
        if content.startswith(_RESULTS):
            return ""
        words = " ".join(content.strip().split("\n\n", 1)[0].split())
        return words if len(words) <= limit else words[: limit - 1] + "…"
    return ""


def _first_line(text: str, limit: int = 90) -> str:
    first = text.strip().split("\n", 1)[0]
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _call_opening(text: str) -> int | None:
    """Where the model opens a tool call in ``text``, the reply so far: at a ``<tool_call>``
    tag, or at the start of a reply that starts as a JSON object or a ```` ```json ```` block
    (its template shows the call format, and a small model sometimes copies it without the
    tag). ``None`` while it has opened none."""
    at = text.find(_OPEN_CALL)
    if at >= 0:
        return at
    return 0 if text.lstrip().startswith(("{", "```json")) else None


def grammar_parses(llm: Llama, source: str) -> bool:
    """Whether llama.cpp's grammar parser accepts ``source`` (it needs the model's vocabulary;
    ``LlamaGrammar.from_string`` only stores the text)."""
    sampler = llama_sampler_init_grammar(llm._model.vocab, source.encode(), b"root")
    if not sampler:
        return False
    llama_sampler_free(sampler)
    return True


@dataclass(slots=True)
class _Prompt:
    tokens: list[int]
    stops: list[str]


class _Run:
    """The completions of one request: its timing, token counts and progress reports."""

    def __init__(
        self, llm: Llama, request: GenerateRequest, emit: Emit, cancelled: Callable[[], bool]
    ) -> None:
        self.llm, self.request, self.emit, self.cancelled = llm, request, emit, cancelled
        self.started = time.monotonic()
        self.first: float | None = None
        self.generated = 0
        self.finish = "stop"
        self.opened = False
        """The last completion stopped where the model opened a call (``opens``)."""

    def complete(
        self,
        tokens: list[int],
        stops: list[str],
        grammar: Any,
        *,
        max_tokens: int | None = None,
        stream: bool = False,
        opens: Callable[[str], int | None] | None = None,
    ) -> str:
        """One completion of ``tokens``; with ``stream``, its text goes to the parent. With
        ``opens`` (where the text so far opens a call, if it does), it stops once the model
        opens one (then :attr:`opened`) and returns the text before the opening."""
        pieces: list[str] = []
        cut: int | None = None
        self.opened = False
        reported = time.monotonic()
        stop_when = StoppingCriteriaList([lambda _ids, _logits: self.cancelled()])
        chunks: Any = None
        try:
            chunks = self.llm.create_completion(
                tokens,
                max_tokens=max_tokens or self.request.max_tokens,
                temperature=self.request.temperature,
                seed=self.request.seed,
                stop=stops,
                stream=True,
                stopping_criteria=stop_when,
                grammar=grammar,
            )
            for chunk in cast("Iterator[Any]", chunks):
                choice = chunk["choices"][0]
                self.finish = choice.get("finish_reason") or self.finish
                text = choice["text"]
                pieces.append(text)
                self.generated += 1
                if not stream:
                    continue
                now = time.monotonic()
                if self.first is None:
                    self.first = reported = now
                    self.emit({"progress": "generating", "prompt_seconds": now - self.started})
                elif now - reported >= _REPORT_EVERY:
                    reported = now
                    self.emit(
                        {
                            "progress": "generating",
                            "tokens": self.generated,  # the request's, as its usage
                            "seconds": now - self.first,
                        }
                    )
                if text:
                    self.emit({"text": text})
                if opens is not None:
                    cut = opens("".join(pieces))
                    if cut is not None:
                        self.opened = True
                        break
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"local model failed: {exc}") from None
        finally:
            if chunks is not None:  # a generator left early: release it now
                chunks.close()
        out = "".join(pieces)
        return out[:cut] if cut is not None else out

    def result(self, text: str, input_tokens: int) -> dict[str, Any]:
        now = time.monotonic()
        first = self.first or now
        return {
            "text": text,
            "input_tokens": input_tokens,
            "output_tokens": self.generated,
            "finish": "cancelled" if self.cancelled() else self.finish,
            "prompt_seconds": first - self.started,
            "generate_seconds": now - first,
        }


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

    def _grammar(self, source: str) -> Any:
        """A compiled grammar, built once per source and checked by llama.cpp's own parser
        (an unparsable grammar would otherwise fail only once sampling starts)."""
        grammar = self._grammars.get(source)
        if grammar is None:
            try:
                grammar = LlamaGrammar.from_string(source, verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"cannot build the tool-call grammar: {exc}") from None
            if not grammar_parses(self.llm, source):
                raise ModelError("cannot build the tool-call grammar: llama.cpp rejected it")
            if len(self._grammars) >= _GRAMMAR_CACHE:
                self._grammars.clear()
            self._grammars[source] = grammar
        return grammar

    def _tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> _Prompt:
        try:
            formatted = self.formatter(
                messages=messages,  # type: ignore[arg-type]
                tools=tools or None,  # type: ignore[arg-type]
            )
        except Exception as exc:
            raise ModelError(f"cannot render the local model's chat template: {exc}") from None
        tokens = self.llm.tokenize(formatted.prompt.encode(), add_bos=False, special=True)
        n_ctx = self.llm.n_ctx()
        if len(tokens) >= n_ctx:
            raise ContextTooLongError(
                f"the prompt has {len(tokens)} tokens; the local model's context window is "
                f"{n_ctx} (n_ctx)"
            )
        return _Prompt(tokens, _stops(formatted.stop))

    def generate(
        self, request: GenerateRequest, emit: Emit, cancelled: Callable[[], bool]
    ) -> dict[str, Any]:
        """Generate a reply; returns its raw text, token counts, finish reason and timing.

        Without tools (or unconstrained) this is one free completion with the tools in the
        template's own section. With tools it is two short steps over a prompt that leaves the
        tools' schemas out (a small model reads a long tool section slowly and then imitates
        it). The system prompt gets a list of steps, one line per tool (:func:`_with_steps`),
        and the reply starts with one word naming its step; then it goes on with the answer
        after that word, or the arguments of the chosen tool after a call prefix written for
        it, with that one tool's parameters listed (:func:`_arguments_prompt`); see
        :mod:`retinue.llm._grammar`. A tool with optional parameters gets one more word first:
        which of them the call gives, if any (:func:`_options_prompt`); the others stay out
        of its arguments. Right after tool results the step is ``answer``.
        """
        if not (request.tools and request.constrain):
            prompt = self._tokens(request.messages, request.tools)
            emit({"progress": "prompt", "prompt_tokens": len(prompt.tokens)})
            run = _Run(self.llm, request, emit, cancelled)
            text = run.complete(prompt.tokens, prompt.stops, None, stream=True)
            return run.result(text, len(prompt.tokens))
        if request.format == "native":
            return self._native(request, emit, cancelled)
        functions = {t["function"]["name"]: t["function"] for t in request.tools}
        messages = _with_steps(request.messages, functions)
        prompt = self._tokens(messages, [])
        emit({"progress": "prompt", "prompt_tokens": len(prompt.tokens)})
        run = _Run(self.llm, request, emit, cancelled)
        choice = ANSWER  # a small model that has just used a tool answers with its result
        if not _after_tool_results(request.messages):
            grammar = self._grammar(choice_grammar(list(functions)))
            choice = run.complete(prompt.tokens, prompt.stops, grammar, max_tokens=8).strip()
            if cancelled():
                return run.result("", len(prompt.tokens))
        function = functions.get(choice)
        if function is None:
            tokens = prompt.tokens + self._words(f"{ANSWER}\n")
            grammar = self._grammar(ANSWER_GRAMMAR)
            text = run.complete(tokens, prompt.stops, grammar, stream=True)
            return run.result(text, len(prompt.tokens))
        step = [*messages, {"role": "assistant", "content": choice}]
        given = self._option(run, step, function, request.messages)
        if cancelled():
            return run.result("", len(prompt.tokens))
        fill = {"role": "user", "content": _arguments_prompt(function, request.messages, given)}
        call = self._tokens([*step, fill], [])
        emit({"progress": "prompt", "prompt_tokens": len(call.tokens)})  # what usage counts
        prefix = call_prefix(choice)
        emit({"text": prefix})
        grammar = self._arguments_grammar(function, given)
        text = prefix + run.complete(
            call.tokens + self._words(prefix), call.stops, grammar, stream=True
        )
        return run.result(text, len(call.tokens))

    def _native(
        self, request: GenerateRequest, emit: Emit, cancelled: Callable[[], bool]
    ) -> dict[str, Any]:
        """The model's own tool-calling format: the tools in the chat template's tool section,
        and free text until the model opens a call (:func:`_call_opening`). From there, after a
        ``<tool_call>`` tag written for it, the call is decoded
        under grammars: an offered tool's name (:func:`call_name_grammar`), then its arguments
        with every optional parameter left optional, and the call's end
        (:func:`arguments_grammar`). One call per reply; the run loop asks again after it. An empty
        reply is asked again once, as an answer (:data:`ANSWER_GRAMMAR`)."""
        prompt = self._tokens(request.messages, request.tools)
        emit({"progress": "prompt", "prompt_tokens": len(prompt.tokens)})
        run = _Run(self.llm, request, emit, cancelled)
        text = run.complete(prompt.tokens, prompt.stops, None, stream=True, opens=_call_opening)
        if not text.strip() and not run.opened and run.finish == "stop" and not cancelled():
            # An empty reply (the end of the turn, or a blank line, first) says nothing: asked
            # again, once, as an answer (ANSWER_GRAMMAR: a visible first character, not a
            # special token's "<"). A small model ends its turn so after a warning about a
            # repeated call, and sometimes right after results.
            answer = self._grammar(ANSWER_GRAMMAR)
            text = run.complete(prompt.tokens, prompt.stops, answer, stream=True)
            return run.result(text, len(prompt.tokens))
        if not run.opened or cancelled():
            return run.result(text, len(prompt.tokens))
        functions = {t["function"]["name"]: t["function"] for t in request.tools}
        text += f"{_OPEN_CALL}\n"
        emit({"text": f"{_OPEN_CALL}\n"})
        tokens = prompt.tokens + self._words(text)
        grammar = self._grammar(call_name_grammar(list(functions)))
        head = run.complete(
            tokens, prompt.stops, grammar, max_tokens=_CALL_NAME_TOKENS, stream=True
        )
        opened = f"{_OPEN_CALL}\n"
        function = next(
            (f for n, f in functions.items() if head == call_prefix(n).removeprefix(opened)),
            None,
        )
        if function is None or cancelled():  # cut short: the parser reports a broken call
            return run.result(text + head, len(prompt.tokens))
        grammar = self._arguments_grammar(function, None)
        arguments = run.complete(tokens + self._words(head), prompt.stops, grammar, stream=True)
        return run.result(text + head + arguments, len(prompt.tokens))

    def _option(
        self,
        run: _Run,
        step: list[dict[str, Any]],
        function: dict[str, Any],
        messages: list[dict[str, Any]],
    ) -> tuple[str, ...]:
        """The optional parameter the call is to give, if the model names one (one word)."""
        optional = optional_parameters(function)
        if not optional:
            return ()
        ask = {"role": "user", "content": _options_prompt(function, optional, messages)}
        prompt = self._tokens([*step, ask], [])
        grammar = self._grammar(option_grammar(optional))
        word = run.complete(prompt.tokens, prompt.stops, grammar, max_tokens=8).strip()
        return (word,) if word in optional else ()

    def _arguments_grammar(
        self, function: dict[str, Any], given: tuple[str, ...] | None = ()
    ) -> Any:
        """The grammar of ``function``'s arguments, of its optional parameters only those
        ``given`` (``None``: any of them, none required); any JSON object if llama.cpp refuses
        it."""
        try:
            return self._grammar(arguments_grammar(function, given))
        except ModelError:
            return self._grammar(arguments_grammar({**function, "parameters": None}))

    def _words(self, text: str) -> list[int]:
        """The tokens of ``text`` written into the reply (special tokens spelled as such)."""
        return self.llm.tokenize(text.encode(), add_bos=False, special=True)

    def close(self) -> None:
        self.llm.close()
