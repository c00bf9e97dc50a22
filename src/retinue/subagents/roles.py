"""Roles: Markdown files with YAML front matter that define a sub-agent.

Three dialects load alike: Retinue's own, Claude Code's sub-agent files and xbot's role files.
Front matter keys and what they mean here (Claude Code's 16 documented fields and ours):

- ``name`` (required; spaces and other characters are normalised to ``-`` and reported; a
  name with ``:`` or a leading ``-`` makes Claude Code skip the file, and Retinue skips it
  too, reported), ``description`` (required); the body is the role's system prompt.
- ``tools``: the allow-list, a YAML list or a string of names separated by commas or spaces
  (``Read Grep Glob``); absent or ``"*"`` = every tool, delegation (``SubAgent``) included,
  as in Claude Code, nested up to the depth limit; present but empty (``tools:``,
  ``tools: ""``, ``tools: []``) = no tool and no delegation, as in Claude Code. ``Task`` or
  ``Agent`` grants delegation; ``Agent(worker, researcher)`` only to those roles (a
  deliberate difference: Claude Code honours that restriction only for the main thread; a
  Retinue role that delegates is the main thread of its own children, so the restriction
  its author wrote is kept). xbot's ``Shell`` / ``FileCreate`` / ``FileReplace`` are Bash /
  Write / Edit. Claude Code's ``LS``, ``MultiEdit``, ``TodoWrite``, ``WebFetch`` and
  ``WebSearch`` are built-in tools here (:mod:`retinue.tools.builtin`). ``mcp__<server>__*``
  (and ``mcp__<server>``) admits every tool of one server. Names no tool answers to are
  reported by :meth:`RoleCatalog.check_tools`; a role left with no usable tool at all does
  not load.
- ``disallowedTools``: removed from whatever ``tools`` gives (a reviewer that disallows
  Write, Edit and Bash never gets them); ``mcp__<server>__*`` removes a whole server,
  ``mcp__*`` every MCP tool, other ``*`` patterns the MCP tools they match.
  ``permissionMode`` is the role's permission mode (:mod:`retinue.policy.modes`); ``plan``
  also disallows every tool that writes or runs commands.
- ``model``: ``provider:model``, ``inherit``, a full model id (``claude-…`` is Anthropic,
  ``gpt-…`` / ``o1…`` OpenAI), or an alias resolved through one tier table: Claude Code's
  ``sonnet`` / ``opus`` / ``haiku`` / ``fable`` (Claude Fable, the top tier) and xbot's
  tiers ``vanguard`` / ``balance`` / ``swift`` (also ``strong`` / ``medium`` / ``weak``),
  all settable in ``config.toml``'s ``[model_aliases]``. An unknown model is reported and
  the role runs on its parent's model.
- ``maxTurns``: the role's iteration limit. ``hooks``: the role's own hooks
  (:mod:`retinue.policy.hooks`).
- ``mcpServers``: MCP servers the role uses, by name (configured in ``.mcp.json`` or
  ``config.toml``) or defined inline (only this role sees those); their tools are
  ``mcp__<server>__<tool>``.
- ``skills``: skills whose bodies are preloaded into the role's system prompt
  (:mod:`retinue.skills`).
- ``initialPrompt``: the start of the role's first user turn (before the task it is given).
  ``background: true``: the role always runs as a background session (interactive, the
  parent collects its replies with ``SubAgentStatus``).
- capabilities: ``capabilities: [memory, spawn_agent]`` (Retinue), a mapping
  ``{memory: true, spawn_agent: false}`` (xbot's, when every key is one of
  :data:`CAPABILITIES`; ``spawn_agent`` defaults to on for xbot files), ``memory: true`` /
  ``spawn_agent: true``, or Claude Code's ``memory: user | project | local``, which turns
  the role's memory on (Retinue keeps it per tenant and role in its data directory,
  whatever the scope). ``memory`` may also be a mapping that turns memory on and names the
  *shared blocks* the role sees in its prompt: ``memory: {scope: project, shared:
  [team-notes, {name: style-guide, write: false}]}``; a name alone is writable (the role's
  memory tools and consolidation may change it), ``write: false`` makes it read-only (a
  write is refused, saying so). Claude Code reads only the string form. A capabilities
  mapping with other keys is not xbot's: its known keys still count,
  ``restricted_tools`` is read as ``disallowedTools`` (its authors' plain meaning: seven
  real files say ``restricted_tools: Task  # No delegation``), the rest is reported.
  Free-text ``capabilities`` are accepted, ignored and reported.
- ``isolation: worktree``: each session of the role works in a git worktree of the
  workspace, removed when it ends unless it has changes, which are reported
  (:mod:`retinue.subagents.worktree`).
- ``outputSchema`` (or ``output_schema``): a JSON schema (a mapping whose ``type`` is
  ``object``) the role's answer must match (:mod:`retinue.engine.output`): the role gets a
  ``final_result`` tool, its parent reads the validated JSON. A schema that is not valid
  JSON schema makes the file not load.
- ``effort`` (Claude Code's) and Retinue's ``max_output_tokens``, ``temperature``,
  ``top_p``, ``timeout``, ``max_retries``, ``fallback_models`` and ``cache_ttl`` make the
  role's :class:`~retinue.llm.settings.ModelSettings` (``Role.model_settings``), applied to
  its model; a wrong value is reported and left out. Every other key (``color``…) is listed
  as ignored.

Search order, recursively in each directory: the first definition of a name wins, and every
later definition of that name is reported as *shadowed* (never dropped silently):

1. ``<workspace>/.retinue/agents/``  (the project's roles)
2. ``<home>/agents/``                (the user's roles; ``home`` is RETINUE_HOME)
3. ``<workspace>/.claude/agents/``   (Claude Code's project sub-agents)
4. ``~/.claude/agents/``             (Claude Code's user sub-agents)
5. the example roles shipped inside the package

A broken file is reported with its path and reason; the other roles still load.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retinue.config import MODEL_TIERS, canonical_model
from retinue.engine.output import output_spec
from retinue.errors import ConfigError, RoleError
from retinue.llm.a2a import A2ARemote, parse_remote
from retinue.llm.settings import SETTING_KEYS, ModelSettings
from retinue.mcp.servers import ServerConfig, role_servers
from retinue.memory.store import MAX_SHARED_BLOCKS, SharedBlock, shared_block_name
from retinue.policy.modes import parse_mode
from retinue.subagents.role_files import find_role_files, read_role_file, split_front_matter

__all__ = [
    "CAPABILITIES",
    "MODEL_TIERS",
    "Role",
    "RoleCatalog",
    "RoleProblem",
    "normalise_name",
    "parse_role",
    "resolve_role_model",
    "role_dirs",
    "split_tools",
    "valid_name",
    "with_initial_prompt",
]

# ask_parent: one-shot too; transcripts: ReadTranscript, its finished sub-agents' transcripts
CAPABILITIES = frozenset({"memory", "spawn_agent", "ask_parent", "transcripts"})
DELEGATION_TOOLS = frozenset({"Task", "Agent"})
TOOL_SYNONYMS = {"Shell": "Bash", "FileCreate": "Write", "FileReplace": "Edit"}  # xbot's names
WRITING_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit", "Bash")
_XBOT_TIERS = frozenset({"vanguard", "balance", "swift"})
_SCOPES = ("user", "project", "local")  # Claude Code's memory scopes
ROLE_SETTING_KEYS = tuple(k for k in SETTING_KEYS if k != "extra")  # role-file model settings
_OWN_KEYS = frozenset(
    {"name", "description", "tools", "disallowedTools", "model", "capabilities", "memory",
     "spawn_agent", "maxTurns", "permissionMode", "mcpServers", "hooks", "skills",
     "initialPrompt", "background", "isolation", "maxBudgetUsd", "max_budget_usd", "a2a",
     "a2aAuthEnv", "outputSchema", "output_schema", *ROLE_SETTING_KEYS}
)  # fmt: skip
PRELOAD_TOOL = "Skill"  # a role that preloads skills gets it (retinue.subagents.factory)
KEPT_UNUSED = ()  # read and kept, no effect yet (README)
MAX_INITIAL_PROMPT = 20_000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SPACED_KEYS = frozenset({"tools", "disallowedTools"})
_SPACE_BEFORE_PAREN = re.compile(r"(?<=[\w*])\s+\(")
_TOOL = re.compile(r"^([A-Za-z_][\w.-]*)\s*\((.*)\)$", re.DOTALL)
PACKAGED_ROLES = Path(__file__).resolve().parent.parent / "roles"


def valid_name(name: str) -> bool:
    """A role or instance name: letters, digits, ``_ . -``, at most 64, no ``/`` or ``:``
    (session ids are built from them with those separators)."""
    return _NAME.fullmatch(name) is not None


def normalise_name(name: str) -> str:
    """``Python DevOps/CI-CD Expert`` -> ``python-devops-ci-cd-expert`` ('' if nothing is left)."""
    return re.sub(r"[^a-z0-9_.]+", "-", name.lower()).strip("-._")[:64]


@dataclass(frozen=True, slots=True)
class Role:
    """A sub-agent's role, read from a role file or written in code (``retinue.Role``)::

        Role(name="reviewer", description="Reviews diffs", prompt="You review code.",
             tools=("Read", "Grep"), capabilities=frozenset({"memory"}))

    ``prompt`` is its system prompt, ``tools`` its allow-list (``None`` = every tool),
    ``model`` a ``provider:model`` string (``None`` = the parent's), ``capabilities``
    ``memory`` (a long-term memory of its own) and ``spawn_agent`` (it may delegate).
    ``shared_memory`` are the tenant's shared blocks it sees in its prompt, each writable or
    read-only (``memory: {shared: [...]}`` in a role file).
    ``output_type`` (a pydantic model, a dataclass, a TypedDict or a JSON schema ``dict``)
    makes its answer typed: validated, given to its parent model as JSON and to Python as
    the object (:mod:`retinue.engine.output`).
    """

    name: str
    description: str
    prompt: str
    tools: tuple[str, ...] | None = None  # None = every tool
    model: str | None = None  # None = inherit the parent's model
    capabilities: frozenset[str] = frozenset()
    source: Path | None = None
    disallowed: tuple[str, ...] = ()
    delegates: tuple[str, ...] | None = None  # with spawn_agent: None = any role
    max_turns: int | None = None
    memory_scope: str | None = None  # Claude Code's user / project / local
    shared_memory: tuple[SharedBlock, ...] = ()  # shared blocks it sees (memory: {shared})
    ignored: tuple[str, ...] = ()  # front matter keys with no meaning here
    notes: tuple[str, ...] = ()  # what was read leniently or left out, for `retinue roles`
    mcp_servers: tuple[tuple[str, ServerConfig | None], ...] = ()  # None: a configured server
    permission_mode: str | None = None  # Claude Code's permissionMode (retinue.policy.modes)
    hooks: Mapping[str, Any] | None = None  # Claude Code's hooks front matter, as written
    skills: tuple[str, ...] = ()  # skills preloaded into its prompt (retinue.skills)
    initial_prompt: str | None = None  # the start of its first user turn
    background: bool = False  # always a background session
    effort: str | None = None  # as written; it also sets model_settings.effort
    isolation: str | None = None  # "worktree": its sessions work in a git worktree
    max_budget_usd: float | None = None  # US dollars each session of the role may spend
    a2a: A2ARemote | None = None  # a remote A2A agent runs its sessions (retinue.llm.a2a)
    model_settings: ModelSettings | None = None  # applied to its model (retinue.llm.settings)
    output_type: Any = None  # its answer's type or JSON schema (retinue.engine.output)

    def can(self, capability: str) -> bool:
        return capability in self.capabilities

    def may_delegate_to(self, role: str) -> bool:
        return self.delegates is None or role in self.delegates


def with_initial_prompt(initial_prompt: str | None, task: str) -> str:
    """A session's first message: its role's ``initialPrompt`` (if it has one), a blank
    line, then the task. One rule for every runner (in-process, a Temporal session, a
    ``retinue/<role>`` run), so a role's sessions start alike wherever they run."""
    return f"{initial_prompt}\n\n{task}" if initial_prompt else task


@dataclass(frozen=True, slots=True)
class RoleProblem:
    path: Path
    reason: str
    severity: str = "error"  # "error": the file did not load; "warning": it loaded

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def role_dirs(workspace: Path, home: Path, user_home: Path | None = None) -> list[Path]:
    """The directories searched for roles, highest precedence first (``user_home`` is the
    user's home directory, for ``~/.claude/agents``)."""
    return [
        workspace / ".retinue" / "agents",
        home / "agents",
        workspace / ".claude" / "agents",
        (user_home or Path.home()) / ".claude" / "agents",
        PACKAGED_ROLES,
    ]


def parse_role(path: Path, text: str, aliases: Mapping[str, str] | None = None) -> Role:
    """Parse one role file; raise :class:`RoleError` saying what is wrong."""
    meta, notes, body = split_front_matter(text)
    name = _name(meta, notes)
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise RoleError("'description' is required (one line saying what the role is for)")
    tools, delegates, grants = _tool_grant(_allow_list(meta), "tools")
    restricted = _restricted_tools(meta.get("capabilities"), notes)
    denied, _, denies_delegation = _tool_grant(
        [*split_tools(meta.get("disallowedTools"), "disallowedTools"), *restricted],
        "disallowedTools",
    )
    denied = denied or ()
    if meta.get("permissionMode") == "plan":
        denied = (*denied, *WRITING_TOOLS)
    mode = _permission_mode(meta.get("permissionMode"), notes)
    xbot = _is_xbot(meta, tools)
    caps, scope = _capabilities(meta, notes, xbot=xbot)
    if grants or (tools is None and not _spawn_turned_off(meta)):
        caps.add("spawn_agent")  # Claude Code: no allow-list is every tool, Agent included
    if denies_delegation:
        caps.discard("spawn_agent")
    model, model_note = resolve_role_model(meta.get("model"), aliases)
    budget = _budget(meta.get("maxBudgetUsd", meta.get("max_budget_usd")), notes)
    if model_note:
        notes.append(model_note)
    remote = parse_remote(meta["a2a"], meta.get("a2aAuthEnv")) if "a2a" in meta else None
    if isinstance(remote, str):
        raise RoleError(remote)
    if remote is not None:  # the remote answers its questions as AskParent; no memory here
        caps = (set(caps) | {"ask_parent"}) - {"memory"}
    shared = _shared_memory(meta.get("memory"), notes) if "memory" in caps else ()
    # read before Role(...) takes the notes: each may add one
    max_turns = _max_turns(meta.get("maxTurns"), notes)
    skills = _skill_names(meta.get("skills"), notes)
    initial_prompt = _initial_prompt(meta.get("initialPrompt"), notes)
    background = _flag(meta.get("background"), "background", notes)
    isolation = _isolation(meta.get("isolation"), notes)
    settings = _model_settings(meta, notes)
    schema = _output_schema(meta.get("outputSchema", meta.get("output_schema")))
    return Role(
        name=name,
        description=" ".join(description.split()),
        prompt=body,
        tools=tools,
        model=model,
        capabilities=frozenset(caps),
        source=path,
        disallowed=tuple(dict.fromkeys(denied)),
        delegates=delegates if "spawn_agent" in caps else None,
        max_turns=max_turns,
        memory_scope=scope,
        shared_memory=shared,
        ignored=tuple(k for k in meta if k not in _OWN_KEYS),
        notes=tuple(notes),
        mcp_servers=_mcp_servers(meta.get("mcpServers")),
        permission_mode=mode,
        hooks=meta["hooks"] if isinstance(meta.get("hooks"), Mapping) else None,
        skills=skills,
        initial_prompt=initial_prompt,
        background=background,
        effort=_kept_text(meta.get("effort")),
        isolation=isolation,
        max_budget_usd=budget,
        a2a=remote,
        model_settings=settings,
        output_type=schema,
    )


def _output_schema(value: Any) -> dict[str, Any] | None:
    """``outputSchema``: checked as the role's output type; a wrong one is a RoleError."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RoleError("'outputSchema' must be a mapping: a JSON schema with type: object")
    try:
        output_spec(value)
    except ConfigError as exc:
        raise RoleError(f"'outputSchema': {exc}") from None
    return value


def _model_settings(meta: dict[str, Any], notes: list[str]) -> ModelSettings | None:
    """The role file's model settings (``effort``, ``max_output_tokens``...); None if none.
    A wrong value is reported in ``notes`` and the role runs with the others."""
    values = {k: meta[k] for k in ROLE_SETTING_KEYS if meta.get(k) is not None}
    out: dict[str, Any] = {}
    for key, value in values.items():
        try:
            ModelSettings.from_mapping({key: value}, "role file")
        except ConfigError as exc:
            notes.append(f"{exc} (left out)")
            continue
        out[key] = value
    return ModelSettings.from_mapping(out, "role file") if out else None


def _allow_list(meta: dict[str, Any]) -> Any:
    """``tools`` as :func:`_tool_grant` takes it: None (every tool) when absent or ``*``;
    an empty list when the key is there with no value (Claude Code gives no tool then)."""
    if "tools" not in meta:
        return None
    value = meta["tools"]
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    if "*" in split_tools(value, "tools"):
        return None
    return value


def _spawn_turned_off(meta: dict[str, Any]) -> bool:
    """``spawn_agent: false`` said outright (xbot's mapping, or the top-level key)."""
    caps = meta.get("capabilities")
    return meta.get("spawn_agent") is False or (
        isinstance(caps, dict) and caps.get("spawn_agent") is False
    )


def _restricted_tools(caps: Any, notes: list[str]) -> list[str]:
    """A non-xbot ``capabilities`` mapping's ``restricted_tools``, read as disallowed tools."""
    if not isinstance(caps, dict) or "restricted_tools" not in caps:
        return []
    try:
        names = split_tools(caps["restricted_tools"], "restricted_tools")
    except RoleError:
        notes.append("capabilities.restricted_tools is not a list of tools (ignored)")
        return []
    notes.append(f"capabilities.restricted_tools {names} read as disallowedTools")
    return names


def _skill_names(value: Any, notes: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    try:
        names = split_tools(value, "skills")
    except RoleError:
        notes.append("'skills' is not a list of skill names (ignored)")
        return ()
    return tuple(dict.fromkeys(names))


def _initial_prompt(value: Any, notes: list[str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        notes.append("initialPrompt is not text (ignored)")
        return None
    if len(value) > MAX_INITIAL_PROMPT:
        notes.append(f"initialPrompt cut to {MAX_INITIAL_PROMPT} characters")
    return value.strip()[:MAX_INITIAL_PROMPT]


def _flag(value: Any, key: str, notes: list[str]) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    notes.append(f"{key} {value!r} is not true or false (ignored)")
    return False


def _isolation(value: Any, notes: list[str]) -> str | None:
    if value is None or value == "worktree":
        return value
    notes.append(f"isolation {value!r} is not 'worktree' (ignored)")
    return None


def _kept_text(value: Any) -> str | None:
    """Kept on the role; the key stays listed as ignored (``retinue roles`` says so)."""
    return None if value is None else str(value)[:100]


def _permission_mode(value: object, notes: list[str]) -> str | None:
    """``permissionMode`` checked against the modes (an unknown one is reported)."""
    if value is None:
        return None
    mode, problem = parse_mode(value, where="permissionMode")
    if problem:
        notes.append(problem)
    return mode


def _mcp_servers(value: Any) -> tuple[tuple[str, ServerConfig | None], ...]:
    if value is None:
        return ()
    try:
        inline, named = role_servers(value, "mcpServers")
    except ConfigError as exc:
        raise RoleError(str(exc)) from None
    return (*((n, None) for n in named), *inline.items())


def _name(meta: dict[str, Any], notes: list[str]) -> str:
    raw = meta.get("name")
    if not isinstance(raw, str | int) or not str(raw).strip():
        raise RoleError("'name' is required (Claude Code skips files without one)")
    name = str(raw).strip()
    if ":" in name or name.startswith("-"):
        raise RoleError(
            f"role name {name!r} has a ':' or begins with '-'; Claude Code skips such a file"
        )
    if valid_name(name):
        return name
    fixed = normalise_name(name)
    if not fixed:
        raise RoleError(f"invalid role name {name!r} (letters, digits, '_', '-', '.')")
    notes.append(f"name {name!r} is used as {fixed!r}")
    return fixed


def split_tools(value: Any, key: str = "tools") -> list[str]:
    """Tool entries from a list or a string; ``Agent(a, b)`` stays one entry. A string of
    ``tools`` or ``disallowedTools`` is split on commas and on spaces (``Read Grep Glob``,
    as Claude Code reads it; ``Bash (git *)`` stays one entry), other keys' on commas."""
    if value is None:
        return []
    if isinstance(value, str):
        items: Iterable[Any] = [value]
    elif isinstance(value, list):
        items = value
    else:
        raise RoleError(f"'{key}' must be a list or a comma-separated string")
    out: list[str] = []
    for item in items:
        if not isinstance(item, str | int | float):
            raise RoleError(f"'{key}' entries must be tool names, not {type(item).__name__}")
        text = str(item)
        if isinstance(value, str) and key in _SPACED_KEYS:
            text = _SPACE_BEFORE_PAREN.sub("(", text.strip())
            text = _spaces_outside_parentheses(text)
        depth, start = 0, 0
        for i, ch in enumerate(text + ","):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if ch == "," and depth <= 0:
                out.append(text[start:i].strip())
                start, depth = i + 1, 0
    return [t for t in out if t]


def _spaces_outside_parentheses(text: str) -> str:
    """Each run of spaces outside ``(…)`` made a comma (``Read Grep`` -> ``Read,Grep``)."""
    out, depth = [], 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        out.append("," if ch.isspace() and depth <= 0 else ch)
    return "".join(out)


def _tool_grant(
    value: Any, key: str
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None, bool]:
    """``(tool names, roles it may delegate to or None for any, whether Task/Agent is named)``."""
    if value is None:
        return None, None, False
    names: list[str] = []
    delegates: list[str] | None = []
    grants = False
    for entry in split_tools(value, key):
        m = _TOOL.match(entry)
        base, args = (m.group(1), m.group(2)) if m else (entry, None)
        if base in DELEGATION_TOOLS:
            grants = True
            if args is None or not args.strip():
                delegates = None
            elif delegates is not None:
                delegates.extend(a.strip() for a in args.split(",") if a.strip())
            continue
        if args is None and base.startswith("mcp__") and base.endswith("__*") and len(base) > 8:
            base = base[: -len("__*")]  # mcp__server__*: the whole server, as mcp__server
        names.append(TOOL_SYNONYMS.get(base, base) if args is None else entry)
    limited = tuple(delegates) if grants and delegates is not None else None  # none named: any
    return tuple(dict.fromkeys(names)), limited, grants


def _is_xbot(meta: dict[str, Any], tools: tuple[str, ...] | None) -> bool:
    """xbot's dialect: a capabilities mapping of xbot's keys only (``memory``,
    ``spawn_agent``…, each true or false), an xbot tier, or xbot's tool names."""
    raw_tools = split_tools(meta.get("tools")) if tools is not None else []
    caps = meta.get("capabilities")
    return (
        (
            isinstance(caps, dict)
            and bool(caps)
            and all(k in CAPABILITIES and isinstance(v, bool) for k, v in caps.items())
        )
        or meta.get("model") in _XBOT_TIERS
        or any(t in TOOL_SYNONYMS for t in raw_tools)
    )


def resolve_role_model(
    value: Any, aliases: Mapping[str, str] | None
) -> tuple[str | None, str | None]:
    """``(model string or None for inherit, a note when it could not be used)``: the names
    ``--model`` accepts (:func:`retinue.config.canonical_model`), and ``inherit``."""
    if value is None:
        return None, None
    if not isinstance(value, str) or not value.strip():
        return None, f"model {value!r} is not a model name; the role runs on its parent's model"
    if value.strip().lower() == "inherit":
        return None, None
    try:
        return canonical_model(value, aliases), None
    except ConfigError as exc:
        return None, f"{exc}; the role runs on its parent's model"


def _capabilities(
    meta: dict[str, Any], notes: list[str], *, xbot: bool
) -> tuple[set[str], str | None]:
    caps: set[str] = {"spawn_agent"} if xbot else set()
    listed = meta.get("capabilities")
    if isinstance(listed, dict):  # xbot: {memory: true, spawn_agent: false}
        for key, on in listed.items():
            if key in CAPABILITIES:
                (caps.add if on else caps.discard)(str(key))
            elif key != "restricted_tools":
                notes.append(f"capability {key!r} is not one Retinue knows (ignored)")
    elif listed is not None:
        items = split_tools(listed, "capabilities") if isinstance(listed, str | list) else []
        if items and all(i in CAPABILITIES for i in items):
            caps.update(items)
        else:
            notes.append("'capabilities' is free text or names no Retinue capability (ignored)")
            caps.update(i for i in items if i in CAPABILITIES)
    scope = None
    memory = meta.get("memory")
    if isinstance(memory, dict):  # {scope: project, shared: [...]}: memory on, and its scope
        memory = memory.get("scope")
        if memory is not None and str(memory).strip().lower() not in _SCOPES:
            notes.append(f"memory.scope {memory!r} is not user, project or local (ignored)")
            memory = None
        memory = True if memory is None else memory
    if memory is True:
        caps.add("memory")
    elif isinstance(memory, str) and memory.strip().lower() in _SCOPES:
        scope = memory.strip().lower()
        caps.add("memory")
    elif memory not in (None, False):
        notes.append(f"memory {memory!r} is not true, user, project or local (ignored)")
    if meta.get("spawn_agent") is True:
        caps.add("spawn_agent")
    return caps, scope


def _shared_memory(memory: Any, notes: list[str]) -> tuple[SharedBlock, ...]:
    """The shared blocks of a ``memory`` mapping: a name (writable) or ``{name, write}``."""
    if not isinstance(memory, dict):
        return ()
    notes.extend(f"memory.{k} is not scope or shared (ignored)" for k in memory
                 if k not in ("scope", "shared"))  # fmt: skip
    listed = memory.get("shared")
    if listed is None:
        return ()
    if not isinstance(listed, list):
        notes.append("memory.shared is not a list of block names (ignored)")
        return ()
    found: dict[str, SharedBlock] = {}
    for entry in listed:
        block = _shared_entry(entry, notes)
        if block is not None and block.name in found:
            notes.append(f"memory.shared names {block.name!r} twice (the first kept)")
        elif block is not None:
            found[block.name] = block
    if len(found) > MAX_SHARED_BLOCKS:
        notes.append(f"memory.shared: only the first {MAX_SHARED_BLOCKS} blocks are kept")
    return tuple(found.values())[:MAX_SHARED_BLOCKS]


def _shared_entry(entry: Any, notes: list[str]) -> SharedBlock | None:
    name, write = entry, True
    if isinstance(entry, dict):
        name, write = entry.get("name"), entry.get("write", True)
        notes.extend(f"memory.shared: key {k!r} is not name or write (ignored)" for k in entry
                     if k not in ("name", "write"))  # fmt: skip
        if not isinstance(write, bool):
            notes.append(f"memory.shared: write {write!r} of {name!r} is not true or false "
                         "(read-only)")  # fmt: skip
            write = False
    valid = shared_block_name(name)
    if valid is None:
        shown = str(name)[:80]
        notes.append(
            f"memory.shared: {shown!r} cannot name a shared block (letters, digits, '_', '.', "
            "'-', at most 64; not persona, human or working_context) (left out)"
        )
        return None
    return SharedBlock(valid, write)


def _budget(value: Any, notes: list[str]) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    notes.append(f"maxBudgetUsd {value!r} is not a positive number (ignored)")
    return None


def _max_turns(value: Any, notes: list[str]) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    notes.append(f"maxTurns {value!r} is not a positive integer (ignored)")
    return None


@dataclass(slots=True)
class RoleCatalog:
    """Every role found, where the search looked, and the problems met while loading."""

    roles: dict[str, Role] = field(default_factory=dict)
    problems: list[RoleProblem] = field(default_factory=list)
    searched: list[tuple[Path, int]] = field(default_factory=list)  # (directory, .md files)

    @classmethod
    def load(cls, dirs: Iterable[Path], aliases: Mapping[str, str] | None = None) -> RoleCatalog:
        catalog = cls()
        for directory in dirs:
            files = list(find_role_files(directory))
            catalog.searched.append((directory, len(files)))
            for path in files:
                catalog._add_file(path, aliases)
        return catalog

    @classmethod
    def of(cls, *roles: Role) -> RoleCatalog:
        return cls({r.name: r for r in roles})

    def _add_file(self, path: Path, aliases: Mapping[str, str] | None) -> None:
        try:
            role = parse_role(path, read_role_file(path), aliases)
        except RoleError as exc:
            self.problems.append(RoleProblem(path, str(exc)))
            return
        first = self.roles.get(role.name)
        if first is not None:
            self.problems.append(
                RoleProblem(path, f"role {role.name!r} is shadowed by {first.source}", "warning")
            )
            return
        self.roles[role.name] = role
        self.problems.extend(RoleProblem(path, note, "warning") for note in role.notes)

    def get(self, name: str) -> Role:
        role = self.roles.get(name)
        if role is None:
            known = ", ".join(sorted(self.roles)[:50]) or "none"
            more = f" (and {len(self.roles) - 50} more)" if len(self.roles) > 50 else ""
            raise RoleError(f"unknown role {name!r}; available roles: {known}{more}")
        return role

    def check_tools(self, known: Iterable[str], mcp_servers: Iterable[str] = ()) -> None:
        """Report tool names no tool answers to (warnings); a role whose allow-list names no
        usable tool at all (and that cannot delegate) is removed and reported as an error.
        ``Skill`` counts as known for a role that preloads skills (its run gets it).
        ``mcp__<server>…`` names count as known when the server is configured (``mcp_servers``)
        or defined in the role; its tools are only listed when the server starts."""
        known_set, configured = set(known), set(mcp_servers)
        for name, role in list(self.roles.items()):
            servers = configured | {n for n, c in role.mcp_servers if c is not None}
            for server, c in role.mcp_servers:
                if c is None and server not in configured and role.source is not None:
                    reason = f"MCP server {server!r} is not configured (.mcp.json, config.toml)"
                    self.problems.append(RoleProblem(role.source, reason, "warning"))

            def ok(t: str, servers: set[str] = servers, skills: bool = bool(role.skills)) -> bool:
                return (
                    t in known_set
                    or (t.startswith("mcp__") and _mcp_server(t) in servers)
                    or (t == PRELOAD_TOOL and skills)  # the run gives it with its skills
                )

            missing = [t for t in role.tools or () if not ok(t)]
            if not missing or role.source is None:
                continue
            usable = [t for t in role.tools or () if ok(t) and t not in role.disallowed]
            unset = sorted({_mcp_server(t) for t in missing if t.startswith("mcp__")})
            hint = f" (MCP servers not configured: {', '.join(unset)})" if unset else ""
            if usable or role.can("spawn_agent"):
                severity = "warning"
                reason = f"tools not available here (left out): {_short(missing)}{hint}"
            else:
                del self.roles[name]
                severity = "error"
                reason = f"no usable tool, {_short(missing)} are unknown here{hint}; not loaded"
            self.problems.append(RoleProblem(role.source, reason, severity))

    def ignored_fields(self) -> Counter[str]:
        """How many loaded roles carry each front matter key that has no meaning here."""
        return Counter(k for r in self.roles.values() for k in r.ignored)

    def errors(self) -> list[RoleProblem]:
        return [p for p in self.problems if p.severity == "error"]

    def search(
        self, query: str, *, limit: int = 8, only: Iterable[str] | None = None
    ) -> list[Role]:
        """The roles that best match ``query``'s words (name matches count most)."""
        words = set(re.findall(r"[a-z0-9]+", query.lower())[:20])
        allowed = set(only) if only is not None else None
        scored = []
        for r in self.roles.values():
            if allowed is not None and r.name not in allowed:
                continue
            name = set(re.findall(r"[a-z0-9]+", r.name.lower()))
            text = set(re.findall(r"[a-z0-9]+", r.description.lower()))
            score = sum(3 * (w in name) + (w in text) for w in words)
            if score:
                scored.append((-score, r.name, r))
        return [r for *_, r in sorted(scored)[:limit]]

    def describe(self) -> str:
        """The role list for a parent's system prompt: one line per role."""
        return "\n".join(f"- {r.name}: {r.description}" for r in self.roles.values())


def _mcp_server(tool: str) -> str:
    """``mcp__<server>__<tool>`` or ``mcp__<server>`` -> ``<server>``."""
    return tool.removeprefix("mcp__").split("__", 1)[0]


def _short(names: list[str], most: int = 6) -> str:
    shown = ", ".join(names[:most])
    return f"[{shown}{f', … {len(names) - most} more' if len(names) > most else ''}]"
