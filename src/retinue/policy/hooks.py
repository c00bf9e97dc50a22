"""Claude Code hooks: commands run at named events, speaking its JSON protocol.

A hook is a shell command (``bash -c``) from the ``hooks`` of a settings file, of Retinue's
``config.toml`` or of a role's front matter (see :mod:`retinue.policy._hook_config` for the
shape). It runs in the workspace, inside the ``Bash`` tool's sandbox unless the user's own
config trusts it outside (:mod:`retinue.policy.launch`), in a PID namespace that dies with it,
with the event as JSON on stdin (``session_id``, ``cwd``, ``hook_event_name``,
``permission_mode`` and the event's own fields) and an environment without secrets
(:mod:`retinue.policy._hook_run`).

What it says, as Claude Code reads it:

* exit 0: fine; stdout may be a JSON object with ``continue`` / ``stopReason``,
  ``decision: "block"`` + ``reason``, ``systemMessage`` and ``hookSpecificOutput``
  (``permissionDecision`` allow / deny / ask + ``permissionDecisionReason``,
  ``updatedInput``, ``additionalContext``). Plain text on stdout is context for
  ``UserPromptSubmit`` and ``SessionStart`` and ignored elsewhere;
* exit 2: block; stderr is the reason (the model reads it for ``PreToolUse``,
  ``PostToolUse``, ``Stop`` and ``SubagentStop``; the user for ``UserPromptSubmit``). The
  events that cannot block (``SessionStart``, ``SessionEnd``, ``SubagentStart``,
  ``PreCompact``, ``Notification``) show it to the user as a notice;
* any other exit code, a timeout, or stdout that starts like JSON but is not: the hook failed.
  That is reported (logged, a ``notice`` event where there is a sink, and
  :attr:`HookResult.problems`) and the turn goes on as if it had said nothing.

The hooks an event matches run in parallel; their answers merge: any block blocks, deny beats
ask beats allow, contexts and reasons join in the order the hooks are configured.

Where hooks come from, and trust (:func:`load_hooks`, :meth:`Hooks.for_role`): the user's
``~/.claude/settings.json`` and ``config.toml`` ``[hooks]`` run as they are (confined, or on
the host when ``config.toml``'s ``[sandbox] trusted_outside`` lists ``hooks``). Hooks defined by
files inside the workspace (``.claude/settings.json``, ``.claude/settings.local.json``, a role
file under the workspace) stay inert until the user approved that exact definition
(``retinue hooks approve``), as every command the workspace defines
(:mod:`retinue.policy.trust`). A hook's environment holds only the ``Bash`` tool's
allow-list, ``CLAUDE_PROJECT_DIR``, the ``env`` object of the user's own
``~/.claude/settings.json`` and, from ``config.toml``'s ``[hooks]``, ``env`` (values) and
``pass_env`` (names of variables taken from Retinue's environment). A project file's ``env``
never reaches a hook.

The events other modules fire go through the helpers at the end of this module
(:func:`prompt_submitted`, :func:`stop_hooks`, :func:`session_began`, ...): each finds the
hooks on ``ctx.gate`` and does nothing when there are none.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from retinue.errors import PolicyError, SessionError
from retinue.events import NOTICE, EventSink, emit
from retinue.policy._hook_config import HookCommand, parse_hooks
from retinue.policy._hook_run import OUTPUT_LIMIT, Outcome, hook_environment, run_hook_command
from retinue.policy.launch import placement_of
from retinue.policy.trust import Definition, TrustStore, needs_trust, untrusted_line
from retinue.tools.builtin.sandbox import RuleMounts, RulePaths

if TYPE_CHECKING:
    from retinue.tools.base import ToolContext

__all__ = [
    "MAX_STOP_BLOCKS",
    "HookCommand",
    "HookResult",
    "Hooks",
    "definition",
    "hook_input",
    "hooks_of",
    "load_hooks",
    "notify",
    "pre_compact",
    "prompt_submitted",
    "session_began",
    "session_ended",
    "stop_hooks",
]

log = logging.getLogger("retinue.policy.hooks")

MAX_STOP_BLOCKS = 3
"""How many times in one turn ``Stop`` / ``SubagentStop`` hooks may send the agent back to
work; after that the turn ends whatever they say."""
STOP_NOTE = "[A {event} hook did not let you stop yet:]\n{reason}"
MAX_TEXT = 10_000  # characters of a reason or context kept from one hook
Permission = Literal["allow", "deny", "ask"]
_PERMISSIONS: tuple[Permission, ...] = ("deny", "ask", "allow")  # strongest first
_PLAIN_CONTEXT = frozenset({"UserPromptSubmit", "SessionStart"})
_STOPS = frozenset({"Stop", "SubagentStop"})
_CANNOT_BLOCK = frozenset(
    {"SessionStart", "SessionEnd", "SubagentStart", "PreCompact", "Notification"}
)


@dataclass(frozen=True, slots=True)
class HookResult:
    """What the hooks of one event said, merged.

    ``block``: a hook exited 2 or decided ``block`` / ``deny`` (or, outside ``Stop`` and
    ``SubagentStop``, said ``continue: false``); ``reason`` is what the model (or the user,
    for ``UserPromptSubmit``) is told. ``permission`` is a ``PreToolUse`` hook's
    ``permissionDecision``; ``context`` its ``additionalContext``; ``updated_input`` replaces
    the tool's arguments. ``stop``: a hook said ``continue: false`` (``reason`` holds its
    ``stopReason``). ``problems``: hooks that failed, timed out or printed invalid JSON (one
    line each); ``messages``: their ``systemMessage`` lines, for the user.
    """

    block: bool = False
    reason: str = ""
    permission: Literal["allow", "deny", "ask"] | None = None
    context: str = ""
    updated_input: dict[str, Any] | None = None
    stop: bool = False
    problems: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()


NOTHING = HookResult()


class Hooks:
    """The command hooks in force, with the environment they run in.

    ``untrusted`` are project hooks not approved yet: listed, never run. ``problems`` are the
    lines about entries that were skipped (by file). ``data_dir`` is hidden from the hooks
    that run in the sandbox (default: the data directory of the environment).
    """

    __slots__ = (
        "_base",
        "_by_event",
        "_roles",
        "commands",
        "data_dir",
        "env",
        "problems",
        "untrusted",
        "workspace",
    )

    def __init__(
        self,
        commands: Iterable[HookCommand] = (),
        *,
        workspace: Path | None = None,
        env: Mapping[str, str] | None = None,
        problems: Iterable[str] = (),
        untrusted: Iterable[HookCommand] = (),
        data_dir: Path | None = None,
    ) -> None:
        self.commands = tuple(commands)
        self.workspace = workspace
        self.data_dir = data_dir
        self.env = dict(env or {})
        self.problems = tuple(problems)
        self.untrusted = tuple(untrusted)
        self._by_event: dict[str, tuple[HookCommand, ...]] = {}
        for c in self.commands:
            self._by_event[c.event] = (*self._by_event.get(c.event, ()), c)
        self._roles: dict[tuple[str, str, str], Hooks] = {}
        self._base: Hooks | None = None  # for a role's hooks: the settings' own

    def __bool__(self) -> bool:
        return bool(self.commands)

    def __repr__(self) -> str:
        return f"Hooks({len(self.commands)} commands, {len(self.untrusted)} not approved)"

    def has(self, event: str) -> bool:
        return event in self._by_event

    # -- building --------------------------------------------------------------------------

    @classmethod
    def from_settings(
        cls,
        data: Mapping[str, Any],
        *,
        source: Path | None = None,
        workspace: Path | None = None,
        data_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
        renames: Mapping[str, str] | None = None,
        where: str | None = None,
    ) -> Hooks:
        """The hooks of one settings object (its ``hooks`` key). With ``workspace``, those
        its file (``source``) defines from inside the workspace wait for approval (kept in
        ``data_dir``; without one nothing is approved). ``where`` names it in problems."""
        where = where or (str(source) if source is not None else "settings")
        commands, problems = parse_hooks(data.get("hooks"), where, source=source,
                                         renames=renames)  # fmt: skip
        untrusted: list[HookCommand] = []
        if workspace is not None and source is not None and commands:
            commands, untrusted, trouble = _trusted_only(commands, source, workspace, data_dir)
            problems.extend(trouble)
        return cls(commands, workspace=workspace, env=env, problems=problems,
                   untrusted=untrusted, data_dir=data_dir)  # fmt: skip

    def merged(self, *others: Hooks) -> Hooks:
        """These hooks and ``others``' together (this one's environment and workspace)."""
        every = (self, *others)
        return Hooks(
            [c for h in every for c in h.commands],
            workspace=self.workspace or next((h.workspace for h in others if h.workspace), None),
            env={k: v for h in reversed(every) for k, v in h.env.items()},
            problems=[p for h in every for p in h.problems],
            untrusted=[d for h in every for d in h.untrusted],
            data_dir=self.data_dir or next((h.data_dir for h in others if h.data_dir), None),
        )

    def for_role(
        self,
        section: Mapping[str, Any] | None,
        source: Path | None,
        *,
        workspace: Path,
        data_dir: Path | None = None,
    ) -> Hooks:
        """A sub-agent's hooks: these, and its role's ``hooks`` front matter (whose ``Stop``
        hooks become ``SubagentStop``, as Claude Code documents), which wait for approval when
        the role file (``source``) lies in ``workspace``. A role's hooks are its own: a
        sub-agent it starts has the settings' hooks and its own role's. Problems and hooks
        that wait are logged once per role file."""
        base = self._base or self
        if not section:
            return base
        key = (str(source), str(workspace), json.dumps(section, sort_keys=True, default=str))
        cached = base._roles.get(key)
        if cached is not None:
            return cached
        own = Hooks.from_settings(
            {"hooks": section},
            source=source,
            workspace=workspace,
            data_dir=data_dir,
            renames={"Stop": "SubagentStop"},
        )
        for line in own.report():
            log.warning("%s", line)
        merged = base
        if own:
            merged = base.merged(own)
            merged._base = base
        base._roles[key] = merged
        return merged

    def report(self) -> list[str]:
        """One line per problem and per hook that waits for approval (to show once)."""
        return [*self.problems, *(untrusted_line(definition(c)) for c in self.untrusted)]

    # -- running ---------------------------------------------------------------------------

    async def run(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        matcher_value: str | None = None,
        events: EventSink | None = None,
        agent_id: str = "",
        mounts: Callable[[], RulePaths] | None = None,
    ) -> HookResult:
        """Run the hooks of ``event`` that match ``matcher_value`` (all of them when it is
        ``None``) in parallel, and merge what they say. Problems are logged, and emitted as
        ``notice`` events on ``events``; they never raise. Cancelling kills the hooks.
        ``mounts``: finds what the deny rules keep from a confined hook (as from ``Bash``);
        asked in a thread (it walks folders), and only when a hook is to run."""
        chosen = [c for c in self._by_event.get(event, ()) if c.matches(matcher_value)]
        chosen = list({c.command: c for c in chosen}.values())  # an identical command runs once
        if not chosen:
            return NOTHING
        kept = await asyncio.to_thread(mounts) if mounts is not None else None
        stdin = json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")
        cwd = _cwd(payload, self.workspace)
        env = hook_environment(cwd if self.workspace is None else self.workspace, self.env)
        outcomes = await asyncio.gather(
            *(run_hook_command(c.command, stdin, cwd=cwd, env=env, timeout=c.timeout,
                               placement=c.placement, data_dir=self.data_dir, mounts=kept)
              for c in chosen)
        )  # fmt: skip
        result = _merge(event, [_read(event, c, o) for c, o in zip(chosen, outcomes, strict=True)])
        for line in result.problems:
            log.warning("%s", line)
            emit(events, NOTICE, agent_id, text=line)
        for line in result.messages:
            emit(events, NOTICE, agent_id, text=line)
        return result


def _cwd(payload: Mapping[str, Any], workspace: Path | None) -> Path:
    where = payload.get("cwd")
    if isinstance(where, str) and where and os.path.isdir(where):
        return Path(where)
    return workspace or Path.cwd()


def _trusted_only(
    commands: list[HookCommand], source: Path, workspace: Path, data_dir: Path | None
) -> tuple[list[HookCommand], list[HookCommand], list[str]]:
    """The commands that may run (those outside the workspace, and the approved ones, which
    run only in the sandbox), and those that wait for approval."""
    store = TrustStore(data_dir) if data_dir is not None else None
    keep: list[HookCommand] = []
    held: list[HookCommand] = []
    problems: list[str] = []
    for c in commands:
        d = definition(c)
        if not needs_trust(d, workspace, data_dir):
            keep.append(c)
            continue
        try:
            approved = store is not None and store.is_trusted(d)
        except PolicyError as exc:
            problems.append(str(exc))
            approved = False
        (keep if approved else held).append(replace(c, placement="sandbox"))
    return keep, held, problems


def definition(c: HookCommand) -> Definition:
    """What an approval of hook ``c`` binds: its event, matcher, place, command and file."""
    assert c.source is not None
    return Definition(kind="hook", name=c.name, command=c.command, args=(), env_keys=(),
                      source=c.source)  # fmt: skip


# -- one hook's answer, and the merge ---------------------------------------------------------


def _who(c: HookCommand) -> str:
    where = f" ({c.source})" if c.source is not None else ""
    return f"{c.event} hook {c.name}{where}"


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " [... cut]"


def _read(event: str, c: HookCommand, o: Outcome) -> HookResult:
    """One hook's outcome as a :class:`HookResult` (see the module text)."""
    problems: list[str] = []
    if o.dropped_stdout or o.dropped_stderr:
        dropped = o.dropped_stdout + o.dropped_stderr
        problems.append(f"{_who(c)} printed more than {OUTPUT_LIMIT} bytes; {dropped} bytes "
                        "were dropped")  # fmt: skip
    if o.error:
        return HookResult(problems=(f"{_who(c)} {o.error}",))
    if o.code is None:
        return HookResult(problems=(*problems, f"{_who(c)} timed out after {c.timeout:g} s and "
                                    "was killed"))  # fmt: skip
    if o.code == 2:
        reason = _clip(o.stderr) or f"blocked by {_who(c)}"
        if event in _CANNOT_BLOCK:  # its stderr is for the user
            return HookResult(problems=tuple(problems), messages=(f"{_who(c)}: {reason}",))
        return HookResult(block=event not in _STOPS or bool(o.stderr.strip()), reason=reason,
                          problems=tuple(problems))  # fmt: skip
    if o.code != 0:
        said = _clip(o.stderr or o.stdout)[:300]
        return HookResult(problems=(*problems, f"{_who(c)} failed (exit code {o.code})"
                                    + (f": {said}" if said else "")))  # fmt: skip
    text = o.stdout.strip()
    if not text.startswith("{"):
        plain = _clip(text) if event in _PLAIN_CONTEXT else ""
        return HookResult(context=plain, problems=tuple(problems))
    try:
        answer = json.loads(text)
    except (ValueError, RecursionError) as exc:
        problems.append(f"{_who(c)} printed invalid JSON ({str(exc)[:120]}); it was ignored")
        return HookResult(problems=tuple(problems))
    if not isinstance(answer, dict):
        return HookResult(problems=tuple(problems))
    return _answer(event, c, answer, problems)


def _answer(event: str, c: HookCommand, a: dict[str, Any], problems: list[str]) -> HookResult:
    """A hook's JSON answer (exit code 0)."""
    text = _texts(a, problems, c)
    block = a.get("decision") == "block"
    reason = text("reason")
    permission: Permission | None = None
    if event == "PreToolUse" and a.get("decision") in ("approve", "block"):  # the older form
        permission, block = ("allow" if a["decision"] == "approve" else "deny"), False
    specific = a.get("hookSpecificOutput")
    context, updated = "", None
    if isinstance(specific, dict):
        named = specific.get("hookEventName", event)
        if named != event:
            problems.append(f"{_who(c)} answered for {str(named)[:40]!r}; that part was ignored")
            specific = {}
        said = specific.get("permissionDecision")
        if event == "PreToolUse" and said in _PERMISSIONS:
            permission = said
            reason = _clip(str(specific.get("permissionDecisionReason") or "")) or reason
        elif said is not None:
            problems.append(f"{_who(c)}: permissionDecision {str(said)[:40]!r} ignored")
        context = _clip(str(specific.get("additionalContext") or ""))
        raw = specific.get("updatedInput")
        if event == "PreToolUse" and isinstance(raw, dict):
            updated = raw
    stop = a.get("continue") is False
    if stop:
        reason = text("stopReason") or reason or f"stopped by {_who(c)}"
        block = block or event not in _STOPS
    if block and not reason:
        reason = f"blocked by {_who(c)}"
    message = text("systemMessage")
    return HookResult(block, reason, permission, context, updated, stop, tuple(problems),
                      (message,) if message else ())  # fmt: skip


def _texts(a: dict[str, Any], problems: list[str], c: HookCommand) -> Any:
    def text(key: str) -> str:
        value = a.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            problems.append(f"{_who(c)}: {key!r} should be a string")
            value = json.dumps(value)[:MAX_TEXT]
        return _clip(value)

    return text


def _merge(event: str, results: Sequence[HookResult]) -> HookResult:
    """Several hooks' answers as one (in the order the hooks are configured)."""
    if len(results) == 1:
        return results[0]
    said: set[Permission | None] = {r.permission for r in results}
    permission: Permission | None = next((p for p in _PERMISSIONS if p in said), None)
    blocking = [r for r in results if r.block or r.stop]
    if permission in ("deny", "ask") and not blocking:
        blocking = [r for r in results if r.permission == permission]
    return HookResult(
        block=any(r.block for r in results),
        reason="\n".join(dict.fromkeys(r.reason for r in blocking if r.reason)),
        permission=permission,
        context="\n".join(r.context for r in results if r.context),
        updated_input=next((r.updated_input for r in results if r.updated_input is not None), None),
        stop=any(r.stop for r in results),
        problems=tuple(p for r in results for p in r.problems),
        messages=tuple(m for r in results for m in r.messages),
    )


# -- loading -------------------------------------------------------------------------------


def load_hooks(
    workspace: Path,
    data_dir: Path,
    *,
    config: Mapping[str, Any] | None = None,
    config_path: Path | None = None,
    user_home: Path | None = None,
    environ: Mapping[str, str] = os.environ,
    trusted_outside: Collection[str] = (),
    sources: Collection[str] | None = None,
) -> Hooks:
    """Every hook in force for ``workspace``: ``~/.claude/settings.json``, ``config.toml``'s
    ``[hooks]`` (``config``), then the project's ``.claude/settings.json`` and
    ``.claude/settings.local.json`` (approved definitions only). A file that cannot be read
    is reported and the others count. ``trusted_outside`` (config.toml's ``[sandbox]``):
    when it lists ``hooks``, the user's own hooks run outside the sandbox. ``sources``
    (:func:`retinue.policy.settings.settings_files`) chooses among them (``None``: all)."""
    from retinue.policy.settings import read_settings, settings_files

    parts: list[Hooks] = []
    problems: list[str] = []
    env: dict[str, str] = {}
    files = settings_files(workspace, user_home, sources)  # type: ignore[arg-type]
    if sources is not None and "user" not in sources:  # config.toml is the user's own
        config = None
    for path, project in sorted(files, key=lambda f: f[1]):  # the user's own first
        if project and config:
            parts.append(_config_hooks(config, config_path, env, environ, problems))
            config = None
        data, _, problem = read_settings(path)
        if problem:
            problems.append(problem)
        if data is None:
            continue
        if not project:  # a project file's env never reaches a hook
            env.update(_env(data.get("env"), f"{path}: env", problems))
        parts.append(Hooks.from_settings(data, source=path, workspace=workspace,
                                         data_dir=data_dir))  # fmt: skip
    if config:
        parts.append(_config_hooks(config, config_path, env, environ, problems))
    parts = [_placed(h, trusted_outside) for h in parts]
    base = Hooks(workspace=workspace, env=env, problems=problems, data_dir=data_dir)
    return base.merged(*parts)


def _placed(hooks: Hooks, trusted_outside: Collection[str]) -> Hooks:
    """``hooks`` with the user's own ones (those not approved from the workspace) placed as
    ``trusted_outside`` says."""
    own = placement_of("hook", "", True, trusted_outside)
    placed = [c if c.placement == "sandbox" else replace(c, placement=own) for c in hooks.commands]
    return Hooks(placed, workspace=hooks.workspace, env=hooks.env, problems=hooks.problems,
                 untrusted=hooks.untrusted, data_dir=hooks.data_dir)  # fmt: skip


def _config_hooks(
    config: Mapping[str, Any],
    path: Path | None,
    env: dict[str, str],
    environ: Mapping[str, str],
    problems: list[str],
) -> Hooks:
    """``[hooks]`` of config.toml: the events, plus ``env`` (values) and ``pass_env``
    (names of Retinue's own variables a hook may see)."""
    where = f"{path or 'config.toml'}: [hooks]"
    section = dict(config)
    env.update(_env(section.pop("env", None), f"{where} env", problems))
    names = section.pop("pass_env", None)
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            problems.append(f"{where} pass_env must be a list of variable names")
        else:
            env.update({n: environ[n] for n in names if n in environ})
    return Hooks.from_settings({"hooks": section}, where=where)


def _env(value: object, where: str, problems: list[str]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{where} must be an object of strings")
        return {}
    good = {str(k): v for k, v in value.items() if isinstance(v, str)}
    if len(good) != len(value):
        problems.append(f"{where}: only string values are passed to hooks")
    return good


# -- the events other modules fire ---------------------------------------------------------


@runtime_checkable
class HookedGate(Protocol):
    """A gate with hooks and a permission mode, as the events fired outside the gate need it
    (:class:`~retinue.policy.gate.Policy` is one; a program's own gate need not be)."""

    @property
    def hooks(self) -> Hooks: ...

    @property
    def mode(self) -> str: ...


def hooks_of(ctx: ToolContext | None) -> Hooks | None:
    """The hooks on ``ctx``'s gate (a :class:`~retinue.policy.gate.Policy`), if any."""
    gate = ctx.gate if ctx is not None else None
    return gate.hooks if isinstance(gate, HookedGate) and gate.hooks else None


def hook_input(ctx: ToolContext, event: str, **fields: Any) -> dict[str, Any]:
    """What a hook reads on stdin for ``event`` (Claude Code's common fields, the role)."""
    return {
        "session_id": ctx.agent_id,
        "cwd": str(ctx.workspace),
        "hook_event_name": event,
        "permission_mode": ctx.gate.mode if isinstance(ctx.gate, HookedGate) else "default",
        "agent_role": ctx.role,
        **fields,
    }


async def _fire(
    ctx: ToolContext, event: str, matcher_value: str | None = None, **fields: Any
) -> HookResult:
    hooks = hooks_of(ctx)
    if hooks is None or not hooks.has(event):
        return NOTHING
    gate = ctx.gate
    mounts = partial(gate.sandbox_paths, ctx.workspace) if isinstance(gate, RuleMounts) else None
    return await hooks.run(event, hook_input(ctx, event, **fields), matcher_value=matcher_value,
                           events=ctx.events, agent_id=ctx.agent_id, mounts=mounts)  # fmt: skip


async def prompt_submitted(ctx: ToolContext, prompt: str) -> str:
    """``UserPromptSubmit`` (the main agent's turns only): the prompt to send, with the
    hooks' context added, or :class:`~retinue.errors.SessionError` saying why a hook blocked
    it (it is dropped: nothing joins the history)."""
    if ctx.depth > 0:
        return prompt
    said = await _fire(ctx, "UserPromptSubmit", prompt=prompt)
    if said.block:
        raise SessionError(f"a UserPromptSubmit hook blocked this message: {said.reason}")
    return f"{prompt}\n\n{said.context}" if said.context else prompt


async def stop_hooks(ctx: ToolContext, last_message: str, *, active: bool) -> str | None:
    """``Stop`` (the main agent) or ``SubagentStop`` (a sub-agent) when its turn ends: the
    message that sends it back to work, when a hook blocks the stop with a reason; ``None``
    to let the turn end. ``active``: a hook sent it back already in this turn."""
    if ctx.depth == 0:
        event = "Stop"
        said = await _fire(ctx, event, stop_hook_active=active,
                           last_assistant_message=last_message)  # fmt: skip
    else:
        event = "SubagentStop"
        said = await _fire(ctx, event, ctx.role, stop_hook_active=active, agent_id=ctx.agent_id,
                           agent_type=ctx.role, last_assistant_message=last_message)  # fmt: skip
    if said.stop or not said.block or not said.reason:
        return None
    return STOP_NOTE.format(event=event, reason=said.reason)


async def session_began(ctx: ToolContext) -> str:
    """``SessionStart`` (``source`` startup) for the main agent, ``SubagentStart`` for a
    sub-agent, as its first turn begins: what its hooks add to its system prompt (with the
    blank line before it), or ``""``."""
    if ctx.depth == 0:
        said = await _fire(ctx, "SessionStart", "startup", source="startup")
    else:
        said = await _fire(ctx, "SubagentStart", ctx.role, agent_id=ctx.agent_id,
                           agent_type=ctx.role)  # fmt: skip
    return f"\n\n{said.context}" if said.context else ""


async def session_ended(ctx: ToolContext, reason: str = "other") -> None:
    """``SessionEnd`` (the main agent's conversation; ``reason``: clear, logout,
    prompt_input_exit, other)."""
    if ctx.depth == 0:
        await _fire(ctx, "SessionEnd", reason, reason=reason)


async def pre_compact(ctx: ToolContext, trigger: str, custom_instructions: str = "") -> None:
    """``PreCompact`` (``trigger``: manual or auto), before a conversation is compressed."""
    await _fire(ctx, "PreCompact", trigger, trigger=trigger,
                custom_instructions=custom_instructions)  # fmt: skip


async def notify(ctx: ToolContext, message: str, notification_type: str) -> None:
    """``Notification``: an approval is requested (``permission_prompt``), or an agent asks
    its parent a question (``agent_question``)."""
    await _fire(ctx, "Notification", notification_type, message=message, title="Retinue",
                notification_type=notification_type)  # fmt: skip
