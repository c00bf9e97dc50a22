"""An independent oracle: what a sub-agent file should give, by the documented rules.

Used by ``test_role_corpus.py`` to check Retinue's role loader file by file. It does not use
Retinue's parser (nor PyYAML): it reads the front matter line by line, knowing only the few
shapes sub-agent files use (``key: value``, ``key:`` followed by ``- item`` lines, a quoted
or block (``|``, ``>``) value, a flow list ``[a, b]``), and raises :class:`Unsupported` on
anything else, so a file it cannot read fails the test instead of being guessed at.

The rules, and where each comes from:

- Claude Code's sub-agent documentation (code.claude.com/docs/en/sub-agents, "Supported
  frontmatter fields", 16 of them: ``name``, ``description``, ``tools``,
  ``disallowedTools``, ``model``, ``permissionMode``, ``maxTurns``, ``skills``,
  ``mcpServers``, ``hooks``, ``memory``, ``background``, ``effort``, ``isolation``,
  ``color``, ``initialPrompt``): a file is Markdown whose YAML front matter opens on the
  first line with ``---``; ``name`` and ``description`` are required, and a name with a
  ``:`` or a leading ``-`` makes Claude Code skip the file; ``tools`` is a string of names
  separated by commas or spaces, or a list, and when omitted (or ``"*"``) the agent
  inherits every tool, ``Agent`` included (sub-agents delegate, nested to a depth limit);
  ``tools:`` with no value gives no tool and no delegation (Claude Code 2.1.328, checked
  with a recording stand-in of the Messages API, issue 41); ``mcp__<server>__*`` in it is the whole
  server; ``disallowedTools`` is removed from what ``tools`` gives; ``permissionMode:
  plan`` is read-only; ``model`` is an alias (``sonnet``, ``opus``, ``haiku``; ``fable``
  is the top tier, with ``opus``), a full model id, or ``inherit`` (the default);
  ``Task(...)`` is ``Agent(...)``'s older name; ``skills`` are preloaded, ``background:
  true`` always runs in the background, ``maxTurns`` bounds the turns. ``tools: []`` is an
  empty tool set (anthropics/claude-code#82562: the spawn path gives such an agent no
  tools).
- Where Retinue knowingly differs from Claude Code (README "Roles and sub-agents"), said
  again at each place below:
  * ``Agent(a, b)`` in a sub-agent's own ``tools``: Claude Code honours the restriction only
    when the agent is the main thread (``claude --agent``). Retinue keeps it: a role that
    delegates is the main thread of its own children, and its author wrote whom it may
    start.
  * ``color`` (a terminal colour) has no effect; Retinue lists it as ignored
    (:data:`NO_EFFECT`). ``effort`` sets the role's model settings.
  * Retinue also reads its own and xbot's keys (``capabilities``, ``spawn_agent``), and a
    ``capabilities`` mapping that is not xbot's may say ``restricted_tools``, read as
    ``disallowedTools`` (Claude Code ignores ``capabilities``).
  * A role whose allow-list leaves no tool Retinue has (only MCP tools of servers not
    configured, for example) is refused ("no usable tool") rather than run bare; Claude
    Code refuses to spawn such an agent too (#82562: "the zero-tool spawn refusal only
    fires when declared entries resolve to nothing").
  * Role names must be identifiers here: a name with spaces or other characters is
    lowercased with every run of them turned into ``-``.
  * Models resolve through Retinue's tier table (configuration, not parsing): the default
    ``[model_aliases]`` of ``config.toml`` (README "Roles and sub-agents"), written out in
    :data:`MODEL_TABLE`; ``claude-…`` ids are Anthropic's, ``provider:model`` is taken as
    written.
- xbot's role files (``CjiW__xbot/``, not Claude Code files; SOURCES.md says so): xbot's
  tool names ``Shell`` / ``FileCreate`` / ``FileReplace`` are Bash / Write / Edit, its
  tiers ``vanguard`` / ``balance`` / ``swift`` are opus / sonnet / haiku, and
  ``spawn_agent`` is on unless ``capabilities: {spawn_agent: false}`` turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MODEL_TABLE", "NO_EFFECT", "Expected", "Unsupported", "expect", "front_matter"]

DOCUMENTED = frozenset(
    {"name", "description", "tools", "disallowedTools", "model", "permissionMode", "maxTurns",
     "skills", "mcpServers", "hooks", "memory", "background", "effort", "isolation", "color",
     "initialPrompt"}
)  # fmt: skip
NO_EFFECT = frozenset({"color"})  # Retinue's differences (see above)
RETINUE_KEYS = frozenset(
    {"capabilities", "spawn_agent", "maxBudgetUsd", "max_budget_usd", "max_output_tokens",
     "temperature", "top_p", "timeout", "max_retries", "fallback_models", "cache_ttl"}
)  # fmt: skip
WRITING_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit", "Bash")

MODEL_TABLE = {
    "sonnet": "anthropic:claude-sonnet-5-5",
    "opus": "anthropic:claude-opus-5-5",
    "haiku": "anthropic:claude-haiku-5-5",
    "fable": "anthropic:claude-fable-5-2",  # Claude Code's top tier
    # xbot's tiers (xbot files only)
    "vanguard": "anthropic:claude-opus-5-5",
    "balance": "anthropic:claude-sonnet-5-5",
    "swift": "anthropic:claude-haiku-5-5",
}
XBOT_TOOLS = {"Shell": "Bash", "FileCreate": "Write", "FileReplace": "Edit"}
XBOT_FOLDER = "CjiW__xbot"

_KEY = re.compile(r"^([A-Za-z_][\w-]*):(?:[ \t]+(.*?))?[ \t]*$")
_ITEM = re.compile(r"^[ \t]*-[ \t]+(.*?)[ \t]*$")
_SUBKEY = re.compile(r"^([A-Za-z_]\w*):[ \t]+(.*?)$")
_DELEGATION = re.compile(r"^(Agent|Task)(?:\((.*)\))?$")


class Unsupported(Exception):
    """The file uses a shape this oracle does not model (fix the oracle, not the file)."""


@dataclass(frozen=True)
class Expected:
    """What loading one file should give; ``reason`` starts the refusal message."""

    loads: bool
    reason: str | None = None
    name: str | None = None
    description: str | None = None  # whitespace runs read as one space
    tools: tuple[str, ...] | None = None  # None: every tool
    disallowed: tuple[str, ...] = ()
    model: str | None = None  # None: the parent's model
    delegates: bool = False
    delegates_to: tuple[str, ...] | None = None  # with delegates: None = any role
    skills: tuple[str, ...] = ()
    background: bool = False
    max_turns: int | None = None
    ignored: tuple[str, ...] = ()  # keys with no effect here, in file order


@dataclass
class _Field:
    value: str
    items: list[str] = field(default_factory=list)
    more: list[str] = field(default_factory=list)  # indented lines after the key


def front_matter(text: str) -> list[str] | None:
    """The lines between the opening ``---`` (first line) and the next ``---``; None if none."""
    lines = text.splitlines()
    if not lines or lines[0].rstrip() != "---":
        return None
    for i, line in enumerate(lines[1:], 1):
        # Not documented: a longer line of dashes also closes it here (Retinue's reading; one
        # corpus file, vijaythecoder's frontend-developer.md, closes with 56 dashes)
        if set(line.rstrip()) == {"-"} and len(line.rstrip()) >= 3:
            return lines[1:i]
    raise Unsupported("front matter is never closed")


def _fields(head: list[str]) -> dict[str, _Field]:
    out: dict[str, _Field] = {}
    current: _Field | None = None
    for line in head:
        key = _KEY.match(line)
        if key:
            if key.group(1) in out:
                raise Unsupported(f"key {key.group(1)!r} given twice")
            current = out[key.group(1)] = _Field(key.group(2) or "")
        elif not line.strip():
            continue
        elif current is None or line[0] not in " \t-":
            raise Unsupported(f"line not understood: {line!r}")
        elif item := _ITEM.match(line):
            current.items.append(item.group(1))
        else:
            current.more.append(line.strip())
    return out


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _text(f: _Field | None) -> str:
    """A scalar value: one line, a quoted or plain value going on over indented lines, or a
    block (``|``, ``>``); only whether it is empty and its words matter here."""
    if f is None:
        return ""
    if f.items:
        raise Unsupported("a list where text was expected")
    first = "" if re.fullmatch(r"[|>][+-]?", f.value) else f.value
    return _unquote(" ".join([first, *f.more]).strip())


def _entries(f: _Field | None, *, spaced: bool = True) -> list[str] | None:
    """Tool entries of ``tools`` / ``disallowedTools`` (a string split on commas and spaces,
    ``spaced``; other keys' on commas only); ``Agent(a, b)`` stays one entry; a key with no
    value is an empty list."""
    if f is None:
        return None
    if f.more:
        raise Unsupported("tools written over several lines")
    if f.items:
        if f.value:
            raise Unsupported("a value and list items together")
        raw = f.items
    elif not f.value:
        return []  # ``tools:`` with no value: Claude Code gives no tool (issue 41, item 6)
    elif f.value.startswith("[") and f.value.endswith("]"):
        raw = [f.value[1:-1]]
    elif _unquote(f.value) != f.value:
        raw = [_unquote(f.value)]  # ``tools: "*"``, ``tools: 'Read, Grep'``
    elif f.value[0] in "{\"'&*!|>#" or " #" in f.value:
        raise Unsupported(f"tools value not understood: {f.value!r}")
    else:
        raw = [f.value]
    spaced = spaced and not f.items and not f.value.startswith("[")
    out: list[str] = []
    for text in raw:
        # take the parenthesised groups out first, then split what is left on commas (and
        # on spaces: Claude Code reads ``tools: Read Grep Glob`` as three tools)
        groups = [g.strip("\"'") for g in re.findall(r"\b(?:Agent|Task)\([^)]*\)", text)]
        rest = re.sub(r"\b(?:Agent|Task)\([^)]*\)", ",", text)
        if spaced and "(" in rest:
            raise Unsupported(f"parentheses in a spaced tools string: {text!r}")
        pieces = re.split(r"[,\s]+" if spaced else ",", rest)
        out += groups + [t.strip().strip("\"'") for t in pieces if t.strip("\"' ")]
    return out


def _model(value: str, xbot: bool) -> str | None:
    spec = _unquote(value.strip())
    if not spec or spec.lower() == "inherit":
        return None
    if spec in ("vanguard", "balance", "swift") and not xbot:
        raise Unsupported(f"xbot tier {spec!r} in a Claude Code file")
    if spec in MODEL_TABLE:
        return MODEL_TABLE[spec]
    if spec.startswith("claude-"):
        return f"anthropic:{spec}"
    if re.fullmatch(r"[a-z]+:\S+", spec):
        return spec
    raise Unsupported(f"model {spec!r} is not in the table")


def _name(value: str) -> str:
    """Claude Code keeps the name as written; Retinue (a difference) wants an identifier."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", value):
        return value
    return "-".join(re.findall(r"[a-z0-9_.]+", value.lower())).strip("-._")


def expect(path: Path, text: str, available: Iterable[str]) -> Expected:
    """What loading ``path`` should give; ``available`` is the tools Retinue has here."""
    xbot = path.parent.name == XBOT_FOLDER
    if text.startswith("\ufeff"):
        raise Unsupported("a byte order mark")
    head = front_matter(text)
    if head is None:
        return Expected(False, "no front matter")
    fields = _fields(head)
    name = _text(fields.get("name"))
    if not name:
        return Expected(False, "'name' is required")
    if ":" in name or name.startswith("-"):
        return Expected(False, "role name has a ':' or begins with '-'")
    description = " ".join(_text(fields.get("description")).split())
    if not description:
        return Expected(False, "'description' is required")

    def tool_names(entries: list[str]) -> tuple[str, ...]:
        names = [e for e in entries if not _DELEGATION.match(e)]
        names = [n[:-3] if re.fullmatch(r"mcp__\w+__\*", n) else n for n in names]
        if xbot:
            names = [XBOT_TOOLS.get(n, n) for n in names]
        return tuple(dict.fromkeys(names))

    listed = _entries(fields.get("tools"))
    if listed is not None and "*" in listed:
        listed = None  # ``tools: "*"``: every tool, as when omitted (issue 41, item 8)
    denied = _entries(fields.get("disallowedTools")) or []
    granting = [m for e in listed or () if (m := _DELEGATION.match(e))]
    delegates = bool(granting) or listed is None  # no allow-list: every tool, Agent too
    if xbot:
        caps = _mapping(fields.get("capabilities"))
        delegates = delegates or caps.get("spawn_agent", "true") != "false"
        delegates = delegates and caps.get("spawn_agent") != "false"
    elif "capabilities" in fields and fields["capabilities"].more:
        raise Unsupported("a capabilities mapping outside xbot's folder")
    if any(_DELEGATION.match(e) for e in denied):
        delegates = False
    named = [a.strip() for m in granting for a in (m.group(2) or "").split(",") if a.strip()]
    bare = any(m.group(2) is None or not m.group(2).strip() for m in granting)
    tools = None if listed is None else tool_names(listed)
    disallowed = tool_names(denied)
    if _text(fields.get("permissionMode")) == "plan":
        disallowed = tuple(dict.fromkeys([*disallowed, *WRITING_TOOLS]))
    model_field = fields.get("model")
    model = _model(model_field.value, xbot) if model_field else None
    usable = [t for t in tools or () if t in set(available) and t not in disallowed]
    if tools and not usable and not delegates:  # Retinue's refusal (see the module doc)
        return Expected(False, "no usable tool")
    return Expected(
        True,
        name=_name(name),
        description=description,
        tools=tools,
        disallowed=disallowed,
        model=model,
        delegates=delegates,
        delegates_to=tuple(named) if delegates and granting and not bare else None,
        skills=tuple(_entries(fields.get("skills"), spaced=False) or ()),
        background=_text(fields.get("background")) == "true",
        max_turns=int(t) if (t := _text(fields.get("maxTurns"))).isdigit() else None,
        ignored=tuple(k for k in fields if k in NO_EFFECT or k not in DOCUMENTED | RETINUE_KEYS),
    )


def _mapping(f: _Field | None) -> dict[str, str]:
    """xbot's ``capabilities:`` followed by indented ``key: value`` lines."""
    if f is None:
        return {}
    pairs = [_SUBKEY.match(m) for m in f.more]
    if f.value or f.items or not all(pairs):
        raise Unsupported("capabilities is not a mapping")
    return {m.group(1): m.group(2) for m in pairs if m}
