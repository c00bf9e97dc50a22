"""Settings, from flags > environment > ``<home>/config.toml`` > defaults.

Environment names other tools rely on: ``RETINUE_MODEL`` (the main agent's model string) and
``RETINUE_HOME`` (the data directory, default ``~/.retinue``). The TOML file may set ``model``,
``tenant``, ``max_depth``, ``max_iterations``, ``session_token_budget`` (tokens one interactive
sub-agent session may spend, input and output together; 0 = unlimited),
``keep_conversations`` (whether ``retinue serve`` stores its chats, default true) and
``conversation_retention_days`` (a stored chat unused this long is forgotten; 0 = never;
default 30), ``media_max_bytes`` (bytes of images and PDFs stored conversations keep in
``<home>/media``; default 2 GiB; see :mod:`retinue.store.media`), ``durable_sessions`` (the
service records every session's state at each step, so sessions and paused turns survive a
restart and move between workers; default false;
``RETINUE_DURABLE_SESSIONS=1`` turns it on; see :mod:`retinue.durable`), and a
``[model_aliases]`` table (names for models, see :func:`canonical_model`)
and ``[mcp_servers.<name>]`` tables (MCP servers, see :mod:`retinue.mcp.config`).
``transcript_retention_days``: how long an ended session's transcript is kept (0 = none are
kept; default 30; see :mod:`retinue.store.transcripts`).
``blob_retention_days``: how long content kept by reference for Temporal's workflows (large
tool results, stored histories) stays in the store unused; Temporal workers sweep the rest
every hour, and a conversation idle longer reads a note where it was (default 90; 0 = never
swept; at least 1 otherwise; see :mod:`retinue.store.blobs`).
Fan-out caps (:mod:`retinue.subagents.caps`; 0 = no cap): ``max_subagents_per_run`` (sub-agent
sessions one turn of the main agent may start, nested ones included; default 50),
``max_subagents_per_conversation`` (the same over a whole conversation; default 500) and
``max_concurrent_subagents`` (sessions open at once in one conversation's tree; default 20).
Every value is checked by a strict pydantic model (:class:`FileSettings`): its type
(a boolean is not an integer) and its range; a bad one is a ``ConfigError`` naming the setting.
``database_url`` (a ``postgresql://`` URL; ``RETINUE_DATABASE_URL`` wins over it) keeps memory
in PostgreSQL, shared by several workers, instead of SQLite in the data directory.
``web_search_url`` (a SearXNG instance, ``http://127.0.0.1:8888``) turns ``WebSearch`` on;
``web_fetch_allow_private = true`` lets ``WebFetch`` reach loopback and private addresses
(see :mod:`retinue.tools.builtin.web`).
Money (:mod:`retinue.telemetry`): ``max_budget_usd`` (US dollars one conversation's main
session may spend; 0 = none) and a ``[model_prices]`` table (``"openai:gpt-4o" = { input =
2.5, cached_input = 1.25, output = 10 }``, dollars per million tokens). Tracing:
``otel_endpoint`` (an OTLP/HTTP base URL; ``OTEL_EXPORTER_OTLP_ENDPOINT`` wins) and
``otel_capture_content`` (prompts and completions in the spans; default false). Providers:
``[providers.openai] api = "responses" | "chat"`` (``RETINUE_OPENAI_API`` wins) chooses the
wire API of ``openai:`` models (:func:`provider_api`). ``[model_settings.<model or alias>]``
tables (``effort = "high"``, ``max_output_tokens = 32000``...) set how that model is asked
(:class:`retinue.llm.settings.ModelSettings`). ``[sandbox] trusted_outside``: which of
the user's own hooks and MCP servers run outside the sandbox (:class:`SandboxSettings`).
``[temporal] address``, ``namespace``, ``task_queue``: the Temporal server ``retinue worker``
and ``retinue serve`` use when given no ``--temporal`` (:class:`TemporalSettings`).

A model is named the same way everywhere (``--model``, ``RETINUE_MODEL``, ``config.toml``, a
role file's ``model:``, ``Agent(model=...)``): :func:`canonical_model` turns ``provider:model``,
a bare model id (``gpt-4o``, ``claude-sonnet-4-5``) or an alias (``sonnet``, ``strong``) into
``provider:model``, and refuses anything else with one message.

The data directory holds conversations and memory: a directory Retinue creates in it is
private to the user (:func:`make_private_dir`, mode 0700), and so are its files (0600).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import Field

from retinue.errors import ConfigError

__all__ = [
    "DEFAULT_MODEL_ALIASES",
    "MODEL_TIERS",
    "FileSettings",
    "SandboxSettings",
    "Settings",
    "canonical_model",
    "create_private_file",
    "default_home",
    "make_private_dir",
    "provider_api",
]

# As Claude Code resolves its floating aliases today (first party): sonnet claude-sonnet-5-5,
# opus claude-opus-5-5, haiku claude-haiku-5-5 (CLI 2.1.284 / 2.1.280 / 2.1.293, per the
# claude-codes crate's ClaudeModel docs, https://docs.rs/claude-codes/latest/claude_codes/
# models/enum.ClaudeModel.html); fable: Claude Fable 5.2, the current Fable ("What's new in
# Claude Fable 5.2", https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2).
DEFAULT_MODEL_ALIASES = {
    "sonnet": "anthropic:claude-sonnet-5-5",
    "opus": "anthropic:claude-opus-5-5",
    "haiku": "anthropic:claude-haiku-5-5",
    "fable": "anthropic:claude-fable-5-2",
}
# aliases that name another alias (xbot's tiers and their plain names)
MODEL_TIERS = {
    "vanguard": "opus", "strong": "opus",
    "balance": "sonnet", "medium": "sonnet",
    "swift": "haiku", "weak": "haiku",
}  # fmt: skip
_OPENAI_ID = re.compile(r"^(gpt-|o\d|chatgpt-|codex-)")
_SQUASHED_GPT = re.compile(r"^gpt[\s_]*(\d[\w.-]*)$", re.IGNORECASE)  # gpt4, GPT 4o


def canonical_model(
    name: str, aliases: Mapping[str, str] | None = None, *, where: str | None = None
) -> str:
    """The ``provider:model`` string that ``name`` stands for, or :class:`ConfigError`.

    ``provider:model`` is kept as it is; an alias (``aliases`` over :data:`MODEL_TIERS` and
    :data:`DEFAULT_MODEL_ALIASES`, any case, one alias may name another) is followed; a bare
    id gets its provider (``claude-…`` Anthropic; ``gemini-…`` Gemini; ``gpt-…``, ``o1…``,
    ``chatgpt-…``, ``codex-…`` OpenAI). ``where`` says where the name was set, for the error
    message.
    """
    table = {**MODEL_TIERS, **DEFAULT_MODEL_ALIASES, **(aliases or {})}
    spec = name.strip()
    for _ in range(8):  # tiers name aliases, aliases may name each other; no loops
        key = spec if spec in table else spec.lower()
        if key not in table:
            break
        spec = table[key].strip()
    provider, colon, model = spec.partition(":")
    if colon and provider and model:
        return spec
    if not colon and spec.startswith("claude-"):
        return f"anthropic:{spec}"
    if not colon and spec.startswith("gemini-"):
        return f"gemini:{spec}"
    if not colon and _OPENAI_ID.match(spec):
        return f"openai:{spec}"
    raise ConfigError(_not_a_model(name, table, where))


def _not_a_model(name: str, table: Mapping[str, str], where: str | None) -> str:
    what = (
        f"model {name!r} is not of the form provider:model (e.g. openai:gpt-4o-mini), "
        "a model id (gpt-4o, claude-sonnet-4-5) or an alias"
    )
    if squashed := _SQUASHED_GPT.fullmatch(name.strip()):
        fix = f"did you mean openai:gpt-{squashed.group(1).lower()}?"
    else:
        what += f" ({', '.join(sorted(table))})"
        fix = ""
    if where:
        fix = f"{fix} (from {where})" if fix else f"check {where}"
    return f"{what}; {fix}" if fix else what


def provider_api(provider: str, home: Path | None = None) -> str | None:
    """The wire API set for ``provider`` (``"responses"`` / ``"chat"``), or None when unset:
    ``RETINUE_<PROVIDER>_API`` wins over ``[providers.<provider>] api`` in config.toml."""
    var = f"RETINUE_{provider.upper()}_API"
    raw = os.environ.get(var, "").strip().lower()
    if raw:
        if raw not in ("responses", "chat"):
            raise ConfigError(f"{var} must be responses or chat, not {raw!r}")
        return raw
    settings = Settings(home=home or default_home())
    settings._apply_file()
    api = (settings.providers.get(provider) or {}).get("api")
    return str(api) if api else None


def make_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) if it does not exist; ``path`` itself is made
    mode 0700, as the data directory and its folders are: they hold conversations and
    memory. An existing directory keeps its mode (``retinue doctor`` warns about it)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if it does not exist (an existing one is left
    as it is). SQLite gives a database's ``-wal`` and ``-shm`` files the database's mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return
    os.close(fd)


class ProviderSettings(pydantic.BaseModel):
    """A ``[providers.<name>]`` table: ``api``, the wire API of an ``openai:`` model
    (``"responses"`` or ``"chat"``; see :mod:`retinue.llm.openai_responses`)."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    api: Literal["responses", "chat"] | None = None


_OUTSIDE = r"^(hooks|mcp|mcp:[A-Za-z0-9_-]{1,64})$"  # what [sandbox] trusted_outside may list


class SandboxSettings(pydantic.BaseModel):
    """The ``[sandbox]`` table: ``trusted_outside`` lists what of the user's own runs on the
    host instead of in the sandbox: ``"hooks"`` (the hooks of ``~/.claude/settings.json`` and
    ``[hooks]``), ``"mcp"`` (every MCP server of ``[mcp_servers]`` and the user's own role
    files) or ``"mcp:<name>"`` (one); see :mod:`retinue.policy.launch`."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    trusted_outside: list[Annotated[str, Field(pattern=_OUTSIDE)]] = []


class TemporalSettings(pydantic.BaseModel):
    """The ``[temporal]`` table: the server (``host:port``) whose workflows ``retinue worker``
    runs and ``retinue serve`` fronts, its namespace and the workers' task queue."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    address: Annotated[str, Field(pattern=r"^\S+:\d{1,5}$", max_length=300)] | None = None
    namespace: Annotated[str, Field(min_length=1, max_length=200)] = "default"
    task_queue: Annotated[str, Field(min_length=1, max_length=200)] = "retinue"


class FileSettings(pydantic.BaseModel):
    """What ``config.toml`` may set, with the type and range of each value."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    model: Annotated[str, Field(min_length=1)] | None = None
    tenant: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    max_depth: Annotated[int, Field(ge=0, le=32)] | None = None
    max_iterations: Annotated[int, Field(ge=1, le=100_000)] | None = None
    max_subagents_per_run: Annotated[int, Field(ge=0, le=100_000)] | None = None
    max_subagents_per_conversation: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    max_concurrent_subagents: Annotated[int, Field(ge=0, le=10_000)] | None = None
    session_token_budget: Annotated[int, Field(ge=0)] | None = None
    keep_conversations: bool | None = None
    conversation_retention_days: Annotated[float, Field(ge=0)] | None = None
    media_max_bytes: Annotated[int, Field(ge=0)] | None = None
    transcript_retention_days: Annotated[float, Field(ge=0)] | None = None
    blob_retention_days: Annotated[float, Field(ge=0)] | None = None  # 0, or 1 and more
    context_edit_trigger: Annotated[float, Field(ge=0, le=1)] | None = None
    context_edit_keep: Annotated[int, Field(ge=0, le=10_000)] | None = None
    durable_sessions: bool | None = None
    model_aliases: dict[str, str] | None = None
    mcp_servers: dict[str, dict[str, Any]] | None = None
    database_url: Annotated[str, Field(pattern=r"^postgres(ql)?://")] | None = None
    web_search_url: Annotated[str, Field(pattern=r"^https?://\S+$", max_length=2000)] | None = None
    web_fetch_allow_private: bool | None = None
    permission_mode: Annotated[str, Field(min_length=1, max_length=40)] | None = None
    permissions: dict[str, list[str]] | None = None  # allow / ask / deny, Claude Code's syntax
    hooks: dict[str, Any] | None = None  # Claude Code's hooks; env, pass_env (retinue.policy.hooks)
    max_budget_usd: Annotated[float, Field(ge=0)] | None = None  # retinue.telemetry.prices
    model_prices: dict[str, dict[str, Annotated[float, Field(ge=0)]]] | None = None
    otel_endpoint: Annotated[str, Field(pattern=r"^https?://\S+$", max_length=2000)] | None = None
    otel_capture_content: bool | None = None  # prompts and completions in spans
    providers: dict[str, ProviderSettings] | None = None  # [providers.openai] api = "chat"
    model_settings: dict[str, dict[str, Any]] | None = None  # checked by retinue.llm.settings
    sandbox: SandboxSettings | None = None  # [sandbox] trusted_outside = ["hooks", "mcp:gh"]
    temporal: TemporalSettings | None = None  # [temporal] address = "127.0.0.1:7233"

    @pydantic.field_validator("blob_retention_days")
    @classmethod
    def _a_day_at_least(cls, days: float | None) -> float | None:
        """Less than a day is refused: a blob in use may look up to two hours unused
        (:mod:`retinue.store.blobs`), so a shorter retention could sweep one in use."""
        if days is not None and 0 < days < 1:
            raise ValueError("must be 0 (never swept) or at least 1 day")
        return days


_KINDS = {"int": "an integer", "string": "a string", "dict": "a table"}


def _problem(path: Path, err: Any) -> str:
    """One pydantic error as a line naming the setting."""
    key = ".".join(str(p) for p in err["loc"])
    kind = str(err["type"]).removesuffix("_type")
    if err["type"] == "extra_forbidden":
        known = sorted(FileSettings.model_fields)
        return f"{path}: unknown setting {key!r} (known: {known})"
    if kind in _KINDS and err["type"].endswith("_type"):
        return f"{path}: {key} must be {_KINDS[kind]}, not {err['input']!r}"
    return f"{path}: {key}: {err['msg']} (got {err['input']!r})"


def default_home() -> Path:
    return Path(os.environ.get("RETINUE_HOME") or Path.home() / ".retinue").expanduser()


@dataclass(slots=True)
class Settings:
    """One process's settings: the data directory (``home``), the workspace, the model, the
    tenant and the limits. :meth:`load` takes explicit arguments first, then the environment
    (``RETINUE_HOME``, ``RETINUE_MODEL``), then ``config.toml`` in the data directory."""

    home: Path = field(default_factory=default_home)
    workspace: Path = field(default_factory=Path.cwd)
    model: str | None = None
    tenant: str = "default"
    max_depth: int = 3
    max_iterations: int = 50
    max_subagents_per_run: int = 50  # sessions one main-agent turn may start; 0 = no cap
    max_subagents_per_conversation: int = 500  # the same over a conversation; 0 = no cap
    max_concurrent_subagents: int = 20  # sessions open at once in one tree; 0 = no cap
    session_token_budget: int = 0  # tokens one interactive session may use; 0 = no limit
    keep_conversations: bool = True  # the service stores its chats' histories (memory DB)
    conversation_retention_days: float = 30.0  # forget a chat not used for this long; 0 = never
    media_max_bytes: int = 2 * 2**30  # images and PDFs stored conversations keep in <home>/media
    transcript_retention_days: float = 30.0  # keep ended sessions' transcripts; 0 = keep none
    blob_retention_days: float = 90.0  # keep Temporal's unused blobs; 0 = never swept
    context_edit_trigger: float = 0.6  # clear old tool results past this share of the window; 0=off
    context_edit_keep: int = 3  # the newest tool results context editing keeps whole
    durable_sessions: bool = False  # record sessions at each step (retinue.durable)
    model_aliases: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_MODEL_ALIASES))
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)  # checked by retinue.mcp
    database_url: str | None = None  # PostgreSQL for memory (several workers); None = SQLite
    web_search_url: str | None = None  # a SearXNG instance for WebSearch; None = off
    web_fetch_allow_private: bool = False  # WebFetch may reach loopback/private addresses
    permission_mode: str | None = None  # retinue.policy.modes; None: the surface's default
    permissions: dict[str, list[str]] = field(default_factory=dict)  # allow / ask / deny rules
    hooks: dict[str, Any] = field(default_factory=dict)  # checked by retinue.policy.hooks
    max_budget_usd: float = 0.0  # US dollars one conversation's main session may spend; 0 = none
    model_prices: dict[str, dict[str, float]] = field(default_factory=dict)  # per Mtok
    otel_endpoint: str | None = None  # OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT wins)
    otel_capture_content: bool = False
    providers: dict[str, dict[str, Any]] = field(default_factory=dict)  # per provider: api
    model_settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # per model/alias
    sandbox: dict[str, Any] = field(default_factory=dict)  # trusted_outside (SandboxSettings)
    temporal: dict[str, Any] = field(default_factory=dict)  # address, namespace, task_queue

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"

    @classmethod
    def load(
        cls,
        *,
        home: Path | None = None,
        workspace: Path | None = None,
        model: str | None = None,
        tenant: str | None = None,
    ) -> Settings:
        """Settings for this process: explicit arguments win, then env, then the TOML file."""
        s = cls(home=(home or default_home()).expanduser().resolve())
        s._apply_file()
        sources = [(model, "--model"), (os.environ.get("RETINUE_MODEL"), "RETINUE_MODEL")]
        for raw, where in [*sources, (s.model, f"model in {s.config_file}")]:
            if raw:  # the first one set wins, named the one way every surface accepts
                s.model = canonical_model(raw, s.model_aliases, where=where)
                break
        s.database_url = os.environ.get("RETINUE_DATABASE_URL") or s.database_url
        durable = os.environ.get("RETINUE_DURABLE_SESSIONS", "").strip().lower()
        if durable:
            s.durable_sessions = durable in ("1", "true", "yes", "on")
        if tenant:
            s.tenant = tenant
        if workspace is not None:
            s.workspace = workspace
        s.workspace = s.workspace.expanduser().resolve()
        if not s.workspace.is_dir():
            raise ConfigError(f"workspace {s.workspace} is not a directory (--workspace)")
        return s

    def _apply_file(self) -> None:
        path = self.config_file
        if not path.is_file():
            return
        try:
            data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        try:
            checked = FileSettings.model_validate(data)
        except pydantic.ValidationError as exc:
            raise ConfigError(_problem(path, exc.errors()[0])) from None
        for key, value in checked.model_dump(exclude_none=True).items():
            if key == "model_aliases":
                self.model_aliases.update(value)
            else:
                setattr(self, key, value)
