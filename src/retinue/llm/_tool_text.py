"""Tool calls written as text by a local model, and the filter that hides them from streams.

Small local models ask for tools in one of these forms, all accepted:

* Qwen-style tags: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (several allowed;
  an unterminated last tag counts when generation stopped inside it);
* a fenced code block (```` ```json ````, bare ```` ``` ````, or another language's, as a
  small model writes ```` ```python ```` around a JSON call) holding such an object, or a list
  of them;
* a reply that is nothing but such an object.

``"parameters"`` is accepted for ``"arguments"``, and arguments may be an object or a JSON
string. Several objects in a row (one per line) are several calls; a call repeated word for word
in one reply (a small model's degenerate repetition) counts once.

With the model's own tool format a small model sometimes describes a call instead of making
it: a fenced block holding ``Glob pattern="*" path="."`` or ``Read(file_path="a.py")``.
:func:`described_calls` reads such a block as the calls it describes, but only when every line
of it names an offered tool and only that tool's own parameters. A line may also be written
as a command line, as a small coder model writes a tool in a shell block
(``Grep -i "SECRET_CODE" settings.py``): flags named as the tool's parameters (``-i``,
``--path x``) and positional words for its string parameters, the required ones first.

Code as action (the native format too): a reply that makes no call but holds fenced shell
blocks (```` ```bash ````, ```` ```sh ````, ```` ```shell ````, or ```` ```console ```` with
``$`` prompts) while ``Bash`` is offered is read by :func:`shell_calls` as one ``Bash`` call
running those commands in order, as smolagents' CodeAgent runs a reply's Python block; the
permission gate decides on it as on any call.

A tagged call whose JSON is broken is still returned as a :class:`ToolCall` (its name
if one can be read, else :data:`MALFORMED_NAME`; its arguments the raw text), so the run loop
turns it into an error result the model reads and can correct. Inside a code block or a bare
reply, only text that looks like a call (has ``"name"`` and ``"arguments"``) is taken as one.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from retinue.messages import ToolCall

__all__ = [
    "MALFORMED_NAME",
    "SHELL_TOOL",
    "ToolCallStreamFilter",
    "described_calls",
    "is_fenced_call",
    "parse_tool_calls",
    "shell_calls",
]

MALFORMED_NAME = "invalid_tool_call"

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_CALL_STARTS = (_OPEN, "{", "```json")
_TAGGED = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
# a fence: its language word (any: a small model puts a JSON call in a ```python block too) on
# a line of its own, else an optional json / tool_call word and the block's text at once
_FENCED = re.compile(
    r"```(?:[ \t]*[A-Za-z][\w+-]*[ \t]*\n|[ \t]*(?:json|JSON|tool_call)?[ \t]*\n?)(.*?)(?:```|\Z)",
    re.DOTALL,
)
_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')
_ARGUMENT_KEYS = ("arguments", "parameters")


def parse_tool_calls(text: str, *, constrained: bool = False) -> tuple[str, tuple[ToolCall, ...]]:
    """Split a model's raw reply into its visible text and the tool calls it makes.

    ``constrained`` (output decoded under :mod:`retinue.llm._grammar`): a reply is calls only
    when it starts as one (a tag, ``{`` or a ```` ```json ```` fence); any other reply is a
    plain answer, JSON and code blocks inside it included.
    """
    if constrained and not text.lstrip().startswith(_CALL_STARTS):
        return text.strip(), ()
    if _OPEN in text:
        calls = [c for m in _TAGGED.finditer(text) for c in _calls_from_text(m.group(1), True)]
        return _TAGGED.sub("", text).strip(), tuple(calls)
    calls: list[ToolCall] = []

    def take_block(match: re.Match[str]) -> str:
        found = _calls_from_text(match.group(1), strict=False)
        calls.extend(found)
        return "" if found else match.group(0)

    content = _FENCED.sub(take_block, text)
    if calls:
        return content.strip(), tuple(calls)
    bare = _calls_from_text(text, strict=False) if text.lstrip().startswith(("{", "[")) else []
    if bare:
        return "", tuple(bare)
    return text.strip(), ()


_DESCRIBED = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*(?:\((.*)\)|\s+(.*))\s*$")
_DESCRIBED_ARG = re.compile(
    r"""\s*([A-Za-z_]\w*)\s*=\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s,'"]+)\s*(?:,|(?=\s)|$)"""
)
_MAX_DESCRIBED = 2_000  # characters of one fenced block read as described calls


def described_calls(
    text: str, schemas: Mapping[str, Mapping[str, Any]]
) -> tuple[str, tuple[ToolCall, ...]]:
    """The calls a reply describes in fenced blocks instead of making them (see the module
    docstring), with the reply's text less those blocks; ``schemas``: each offered tool's
    name and JSON schema. A block with any line that is not such a call is left as text."""
    calls: list[ToolCall] = []
    seen: set[tuple[str, str]] = set()

    def take_block(match: re.Match[str]) -> str:
        body = match.group(1)  # (without the fence's language word: ```bash)
        if len(body) > _MAX_DESCRIBED:
            return match.group(0)
        lines = [ln for ln in body.splitlines() if ln.strip()]
        if not lines:
            return match.group(0)
        found = [_described_call(ln, schemas) for ln in lines]
        if any(c is None for c in found):
            return match.group(0)
        for call in found:  # a line repeated word for word counts once, as with JSON calls
            if call is not None and (call.name, call.arguments) not in seen:
                seen.add((call.name, call.arguments))
                calls.append(call)
        return ""

    content = _FENCED.sub(take_block, text)
    return (content.strip(), tuple(calls)) if calls else (text.strip(), ())


SHELL_TOOL = "Bash"
_SHELL_BLOCK = re.compile(
    r"```[ \t]*(bash|sh|shell|console)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE
)
_PROMPT = re.compile(r"^[ \t]*\$ (.*)$")


def shell_calls(
    text: str, schemas: Mapping[str, Mapping[str, Any]]
) -> tuple[str, tuple[ToolCall, ...]]:
    """A reply's closed fenced shell blocks as one ``Bash`` call (see the module docstring),
    with the reply's text less those blocks; none unless ``schemas`` (each offered tool's name
    and JSON schema) offers ``Bash`` with a ``command``. In a ``console`` block only the lines
    after a ``$`` prompt are commands (the rest is output); in the others too, if any line has
    one. A block repeated word for word counts once; blocks of more than
    :data:`_MAX_DESCRIBED` characters in all stay text, as do comment-only blocks."""
    bash = schemas.get(SHELL_TOOL) or {}
    if "command" not in (bash.get("properties") or {}):
        return text.strip(), ()
    commands: list[str] = []

    def take_block(match: re.Match[str]) -> str:
        command = _shell_command(match.group(1).lower(), match.group(2))
        if command is None:
            return match.group(0)
        if command not in commands:
            commands.append(command)
        return ""

    content = _SHELL_BLOCK.sub(take_block, text)
    script = "\n".join(commands)
    if not commands or len(script) > _MAX_DESCRIBED:
        return text.strip(), ()
    arguments = json.dumps({"command": script}, ensure_ascii=False)
    return content.strip(), (ToolCall(_new_id(), SHELL_TOOL, arguments),)


def _shell_command(language: str, body: str) -> str | None:
    """The commands of one shell block, or None if it holds none."""
    if len(body) > _MAX_DESCRIBED:
        return None
    lines = body.splitlines()
    prompted = [m.group(1) for line in lines if (m := _PROMPT.match(line))]
    if prompted:
        lines = prompted
    elif language == "console":
        return None  # output only
    command = "\n".join(lines).strip()
    if not any(ln.strip() and not ln.lstrip().startswith("#") for ln in command.splitlines()):
        return None
    return command


def is_fenced_call(block: str) -> bool:
    """Whether a whole fenced block (fence to fence) is read as calls by
    :func:`parse_tool_calls` (unconstrained): the stream filter's default test."""
    return bool(parse_tool_calls(block)[1])


def _described_call(line: str, schemas: Mapping[str, Mapping[str, Any]]) -> ToolCall | None:
    match = _DESCRIBED.match(line)
    if match is None or match.group(1) not in schemas:
        return None
    name, raw = match.group(1), (match.group(2) if match.group(2) is not None else match.group(3))
    properties = schemas[name].get("properties") or {}
    arguments = _keyword_arguments(raw.strip(), properties)
    if arguments is None and match.group(2) is None:
        arguments = _command_line_arguments(raw, schemas[name])
    if arguments is None or (not arguments and match.group(2) is None):
        return None  # not a call, or a bare word
    return ToolCall(_new_id(), name, json.dumps(arguments, ensure_ascii=False))


def _keyword_arguments(raw: str, properties: Mapping[str, Any]) -> dict[str, Any] | None:
    """``key=value`` pairs naming the tool's own parameters, or None."""
    arguments: dict[str, Any] = {}
    at = 0
    while at < len(raw):
        arg = _DESCRIBED_ARG.match(raw, at)
        if arg is None or arg.end() == at or arg.group(1) not in properties:
            return None
        key, value = arg.group(1), arg.group(2)
        arguments[key] = _described_value(value, properties[key])
        at = arg.end()
    return arguments


_KEYWORD = re.compile(r"[A-Za-z_]\w*=")


def _command_line_arguments(raw: str, schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A tool's arguments written as a command line (see the module docstring), or None.

    A flag is a parameter's own name (``-i``) or the name after one or two dashes
    (``--path``): a boolean one stands alone, any other takes the next word. Positional words
    fill the string parameters, the required ones first, one more than those at most."""
    try:
        words = shlex.split(raw)
    except ValueError:  # an unterminated quote
        return None
    properties: Mapping[str, Any] = schema.get("properties") or {}
    required = [k for k in schema.get("required") or () if k in properties]
    strings = [k for k in properties if _kind(properties[k]) == "string"]
    slots = [k for k in required if k in strings] + [k for k in strings if k not in required]
    slots = slots[: len([k for k in required if k in strings]) + 1]
    arguments: dict[str, Any] = {}
    at = 0
    while at < len(words):
        word = words[at]
        if _KEYWORD.match(word):
            return None  # a key=value pair the keyword reading refused
        if word.startswith("-") and len(word) > 1:
            key = _flag(word, properties)
            if key is None or key in arguments:
                return None  # a flag the tool does not have, or one given twice
            if _kind(properties[key]) == "boolean":
                arguments[key] = True
            elif at + 1 < len(words):
                at += 1
                arguments[key] = _typed(words[at], properties[key])
            else:
                return None
        else:
            slot = next((k for k in slots if k not in arguments), None)
            if slot is None:
                return None
            arguments[slot] = word
        at += 1
    return arguments


def _flag(word: str, properties: Mapping[str, Any]) -> str | None:
    """The parameter a command-line flag (``-i``, ``--path``) names, if any."""
    return next((key for key in (word, word.lstrip("-")) if key in properties), None)


def _kind(schema: Any) -> str | None:
    """A parameter's JSON type; of an optional one (``anyOf`` with null), the other's."""
    if not isinstance(schema, dict):
        return None
    if "anyOf" in schema:
        kinds = [_kind(option) for option in schema["anyOf"]]
        return next((k for k in kinds if k not in (None, "null")), None)
    kind = schema.get("type")
    return kind if isinstance(kind, str) else None


def _described_value(raw: str, schema: Any) -> Any:
    if raw[:1] in "'\"" and len(raw) >= 2:
        inner = raw[1:-1]
        return inner.replace("\\" + raw[0], raw[0])
    return _typed(raw, schema)


def _typed(raw: str, schema: Any) -> Any:
    """An unquoted word as the parameter's type says (a string if it says nothing else)."""
    kind = _kind(schema)
    with contextlib.suppress(ValueError):
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
    if kind == "boolean" and raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    return raw


def _calls_from_text(raw: str, strict: bool) -> list[ToolCall]:
    """The calls in one JSON snippet; if it is broken, a malformed call (``strict``) or none."""
    raw = raw.strip()
    calls: list[ToolCall] = []
    seen: set[tuple[str, str]] = set()
    for value in _decode_all(raw):
        for item in value if isinstance(value, list) else [value]:
            call = _call_from_object(item)
            if call is not None and (call.name, call.arguments) not in seen:
                seen.add((call.name, call.arguments))
                calls.append(call)
    if calls:
        return calls
    if strict or _looks_like_call(raw):
        name = m.group(1) if (m := _NAME.search(raw)) else MALFORMED_NAME
        return [ToolCall(_new_id(), name or MALFORMED_NAME, raw)]
    return []


def _decode_all(raw: str) -> list[Any]:
    """The JSON values at the start of ``raw``, one after another (JSON Lines included).

    Decoding stops at the first thing that is not JSON (trailing text, a truncated object).
    """
    decoder, values, at = json.JSONDecoder(), list[Any](), 0
    while at < len(raw):
        try:
            value, at = decoder.raw_decode(raw, at)
        except json.JSONDecodeError:
            break
        values.append(value)
        while at < len(raw) and raw[at].isspace():
            at += 1
    return values


def _call_from_object(item: Any) -> ToolCall | None:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return None
    key = next((k for k in _ARGUMENT_KEYS if k in item), None)
    if key is None:
        return None
    args = item[key]
    raw_args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return ToolCall(_new_id(), item["name"], raw_args)


def _looks_like_call(raw: str) -> bool:
    return '"name"' in raw and any(f'"{k}"' in raw for k in _ARGUMENT_KEYS)


def _new_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


_FENCE = "```"
_JSON_FENCE = "```json"
_TEXT, _TAG, _BLOCK = 0, 1, 2  # where the filter is: in text, in a tag, in a fenced block


class ToolCallStreamFilter:
    """Passes streamed text through, except what may be a tool call.

    Hidden: what lies inside ``<tool_call>`` … ``</tool_call>``; a reply that starts with
    ``{``, ``[`` or ```` ```json ```` (a call known only at the end; the native format stops
    such a reply where it opens and writes the call as a tag); and a fenced block that
    ``is_call`` (given the whole block, fence to fence) says is a call. A fenced block is held
    until it closes, and text that might be the start of a tag or fence until the next delta
    settles it. :meth:`flush` ends the stream and returns what was held, unless it turned out
    to be a call.
    """

    def __init__(self, is_call: Callable[[str], bool] = is_fenced_call) -> None:
        self._is_call = is_call
        self._pending = ""
        self._where = _TEXT
        self._started = False
        self._bare_json = False

    def feed(self, delta: str) -> str:
        self._pending += delta
        if not self._started:
            head = self._pending.lstrip()
            if not head or (len(head) < len(_JSON_FENCE) and _JSON_FENCE.startswith(head)):
                return ""  # nothing yet, or maybe a ```json fence
            self._started = True
            self._bare_json = head.startswith(("{", "[", _JSON_FENCE))
        if self._bare_json:
            return ""
        out: list[str] = []
        while self._pending and self._step(out):
            pass
        return "".join(out)

    def _step(self, out: list[str]) -> bool:
        """Move through the held text once; False when it waits for more."""
        pending = self._pending
        if self._where == _TAG:
            at = pending.find(_CLOSE)
            if at < 0:
                self._pending = pending[len(pending) - _partial_suffix(pending, _CLOSE) :]
                return False
            self._pending, self._where = pending[at + len(_CLOSE) :], _TEXT
            return True
        if self._where == _BLOCK:
            at = pending.find(_FENCE, len(_FENCE))
            if at < 0:
                return False  # the whole block is held until it closes
            block, self._pending = pending[: at + len(_FENCE)], pending[at + len(_FENCE) :]
            if not self._is_call(block):
                out.append(block)
            self._where = _TEXT
            return True
        tag, fence = pending.find(_OPEN), pending.find(_FENCE)
        if tag >= 0 and (fence < 0 or tag < fence):
            out.append(pending[:tag])
            self._pending, self._where = pending[tag + len(_OPEN) :], _TAG
            return True
        if fence >= 0:
            out.append(pending[:fence])
            self._pending, self._where = pending[fence:], _BLOCK
            return True
        keep = max(_partial_suffix(pending, _OPEN), _partial_suffix(pending, _FENCE))
        out.append(pending[: len(pending) - keep])
        self._pending = pending[len(pending) - keep :]
        return False

    def flush(self, *, found_calls: bool) -> str:
        """What is still held and should be shown; ``found_calls``: the reply made calls."""
        held, self._pending = self._pending, ""
        if self._where == _TAG or (found_calls and (self._bare_json or self._where == _BLOCK)):
            return ""
        return held


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that is a proper beginning of ``tag``."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0
