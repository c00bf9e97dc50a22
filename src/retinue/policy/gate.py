"""The gate every tool call passes: guards, hooks, rules, modes, and an approval where they
say ask.

:class:`Policy` is carried on the tool context (``ToolContext.gate``), so a sub-agent gets its
parent's, narrowed by its role's ``permissionMode`` (:meth:`Policy.narrowed`); the run loop
calls :meth:`Policy.execute` instead of running a call directly. A refused call never runs:
the model reads a tool result that says why, and the same turn goes on. The program's guards
(:mod:`retinue.policy.guards`) come first, then the hooks, then the rules and modes; a tool
declared with ``needs_approval`` and a guard that asks are put to a person in every mode
(only the person's own "always" answers lift that), and refused where nobody can answer.
The loop also hands each model call (:meth:`Policy.screen_model_call`) and each answer
(:meth:`Policy.screen_answer`) to the guards.
"""

from __future__ import annotations

import asyncio
import json
import os
from copy import deepcopy
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from retinue.errors import ToolError
from retinue.events import APPROVAL_ANSWERED, APPROVAL_REQUESTED, emit
from retinue.messages import Message, ToolCall, ToolResultMessage
from retinue.policy.approvals import (
    PREVIEW,
    Approval,
    ApprovalRequest,
    Approver,
    arguments_digest,
    ask_approver,
    new_request_id,
)
from retinue.policy.confine import rule_paths
from retinue.policy.guards import (
    FinalAnswer,
    Guard,
    ModelRequest,
    ToolRequest,
    ToolResponse,
    named,
    needs_approval,
    screen,
)
from retinue.policy.hooks import HookResult, Hooks, hook_input, notify
from retinue.policy.modes import (
    Decision,
    Kind,
    PermissionMode,
    decide_by_mode,
    kind_of,
    strictest,
)
from retinue.policy.rules import Rule, RuleSet, rule_for, rule_names
from retinue.tools.base import refused
from retinue.tools.builtin.pathrules import PathFilter
from retinue.tools.builtin.reach import Places, spellings
from retinue.tools.builtin.sandbox import RulePaths

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from retinue.tools.base import Tool, ToolContext, ToolRegistry

__all__ = ["APPROVAL_ANSWERED", "APPROVAL_REQUESTED", "Policy"]


_MODE_DENIES_ALLOW_RULES: dict[str, frozenset[Kind]] = {
    "plan": frozenset({"edit", "command", "mcp"}),
}


@dataclass(slots=True)
class _Shared:
    """What every policy of one session tree shares: "always" answers given so far."""

    always: RuleSet = field(default_factory=RuleSet)
    version: int = 0  # bumped with each "always": what a policy remembered may be stale

    def add(self, rule: Rule) -> None:
        self.always.allow_rule(rule)
        self.version += 1


_NO_VERDICT = HookResult()
_MESSAGES = get_args(Message)
MODEL_CALL, ANSWER, TOOL_RESULT = "(model call)", "(final answer)", "(tool result)"  # asked of
# a person by a guard: the request's ``tool``
_NOBODY = (
    "{why}, and nobody is here to approve it: it needs a person's approval in every "
    "permission mode (an approver, or retinue chat, can give it)"
)
MEMO_NAMES = 1_000  # tool names a policy remembers a quick decision for


@dataclass(frozen=True, slots=True)
class Policy:
    """Modes from the top down to this agent, the rules, the hooks and the approver.

    ``approver=None``: nobody can answer, so a call that would ask is refused with a message
    that says how to allow it. ``sandboxed`` says whether ``Bash`` runs in bubblewrap here.
    ``guards`` are the program's own (:mod:`retinue.policy.guards`), at every depth.
    """

    modes: tuple[PermissionMode, ...] = ("default",)
    rules: RuleSet = field(default_factory=RuleSet)
    approver: Approver | None = None
    hooks: Hooks = field(default_factory=Hooks)
    sandboxed: bool | None = False  # None: ask bubblewrap, once, when a command is decided
    guards: tuple[Guard, ...] = ()
    _shared: _Shared = field(default_factory=_Shared)
    _memo: dict[str, tuple[int, Decision | None]] = field(
        init=False, default_factory=dict, repr=False, compare=False
    )

    @property
    def mode(self) -> PermissionMode:
        """The mode of the agent this policy is for (the last of its chain)."""
        return self.modes[-1]

    def narrowed(self, mode: PermissionMode | None, hooks: Hooks | None = None) -> Policy:
        """A sub-agent's policy: its role's mode (if any) added to the chain, and its role's
        hooks (if any) in place of the settings' own for its calls."""
        if mode is None and hooks is None:
            return self
        return replace(
            self,
            modes=self.modes if mode is None else (*self.modes, mode),
            hooks=self.hooks if hooks is None else hooks,
        )

    def with_approver(self, approver: Approver | None) -> Policy:
        """The same policy answered by ``approver``: a fresh tree's own "always" answers."""
        return replace(self, approver=approver, _shared=_Shared())

    def always_given(self) -> tuple[Rule, ...]:
        """The rules the session tree's "always" answers have added so far, in order."""
        return tuple(self._shared.always.allow)

    def allow_always(self, rule: Rule) -> None:
        """Add a rule an "always" answer gave elsewhere in the session tree (a Temporal
        workflow carries them from one tool call's activity to the next)."""
        self._shared.add(rule)

    def decide(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> tuple[Decision, str]:
        """Allow, ask or deny for one call, and why (a rule's text or the mode's name)."""
        kind = kind_of(tool)
        found = self.rules.match(tool, args, ctx.workspace) or self._shared.always.match(
            tool, args, ctx.workspace
        )
        best: Decision | None = None
        why = ""
        for mode in self.modes:
            decision = _under(mode, kind, found, sandboxed=self._sandboxed(kind))
            if best is None or strictest(decision, best) != best:
                best, why = decision, _reason(mode, kind, found, decision, tool)
        assert best is not None  # (a policy has at least one mode)
        if kind == "edit" and best == "allow" and _protected(args, ctx):
            best, why = "ask", f"{tool} would change the workspace's own settings or commands"
        return self._no_asking(best, why)

    def hidden_paths(self, tool: str, path: str | None, ctx: ToolContext) -> PathFilter:
        """What a ``Grep`` or ``Glob`` call searching from ``path`` must leave out: the files
        a Read deny rule names (Claude Code applies Read rules to Grep and Glob too), and
        those an ask rule names that the call itself did not match (nobody was asked). The
        search tools ask this once per call (:mod:`retinue.tools.builtin.pathrules`)."""
        patterns = self.rules.hiding(tool, {} if path is None else {"path": path}, ctx.workspace)
        if not patterns:
            return PathFilter()
        spellings = (os.path.normpath(ctx.workspace), os.path.realpath(ctx.workspace))
        return PathFilter(patterns, tuple(dict.fromkeys(spellings)))

    def sandbox_paths(self, workspace: Path) -> RulePaths:
        """What the sandbox must hide (Read deny rules) or keep read-only (Edit deny rules)
        from a command in ``workspace`` (:mod:`retinue.policy.confine`)."""
        return rule_paths(self.rules.deny, workspace)

    def _no_asking(self, decision: Decision, why: str) -> tuple[Decision, str]:
        """Under ``dontAsk`` (anywhere in the chain) what would ask a person is refused."""
        if decision == "ask" and "dontAsk" in self.modes:
            return "deny", f"{why} (permission mode 'dontAsk' asks nobody)"
        return decision, why

    def execute(
        self, registry: ToolRegistry, call: ToolCall, ctx: ToolContext
    ) -> Coroutine[Any, Any, ToolResultMessage]:
        """Run ``call`` if the policy lets it, asking for approval where it must (awaited as
        ``await policy.execute(...)``). A call with nothing to look at is the registry's own
        coroutine: no frame of the gate's between the loop and the tool."""
        tool = registry.get(call.name)
        plain = not self.guards and (tool is None or tool.needs_approval is False)
        if plain and self._quick(call.name) == "allow":  # (bypass mode with nothing to check:
            return registry.execute(call, ctx)  # every tool but an edit: it looks closer)
        return self._checked(registry, tool, call, ctx)

    async def _checked(
        self, registry: ToolRegistry, tool: Tool | None, call: ToolCall, ctx: ToolContext
    ) -> ToolResultMessage:
        """:meth:`execute` for a call the guards, hooks, rules or modes look at."""
        args = _arguments(call.arguments)
        if args is None:  # not a JSON object: the tool refuses it without running anything
            return await registry.execute(call, ctx)

        def request(a: dict[str, Any]) -> ToolRequest:  # a copy: only a rewrite counts
            return ToolRequest(call.name, deepcopy(a), ctx, call.id)

        screened = await screen(named(self.guards, "before_tool"), args, request, dict)
        if screened.refused:
            return _refused(call, ctx, screened.refused)
        if screened.value is not args:
            args = screened.value
            call = replace(call, arguments=json.dumps(args))
        verdict = await self._pre_hooks(call, args, ctx)
        if verdict.block or verdict.permission == "deny":
            return _refused(call, ctx, verdict.reason or "a PreToolUse hook blocked this call")
        if verdict.updated_input is not None:
            args = verdict.updated_input
            call = replace(call, arguments=json.dumps(args))
        try:
            wanted = await needs_approval(tool, args, ctx)
        except ToolError as exc:
            return _refused(call, ctx, str(exc))
        forced = [*screened.asks, *([f"{call.name} needs approval"] if wanted else [])]
        decision, why = self.decide(call.name, args, ctx)
        if forced and decision != "deny" and not self._always(call.name, args, ctx):
            decision, why = self._no_asking("ask", "; ".join(forced))  # (no hook lifts these)
        elif verdict.permission == "allow" and decision == "ask" and not _protected(args, ctx):
            decision = "allow"  # (never for what the workspace runs: that asks a person)
        elif verdict.permission == "ask" and decision == "allow":
            decision, why = self._no_asking(
                "ask", verdict.reason or "a PreToolUse hook asks for approval"
            )
        if decision == "deny":
            return _refused(call, ctx, why)
        if decision == "ask":
            answer = await self._ask(call.name, args, ctx, why, call.id, forced=bool(forced))
            if not answer.allow:
                said = f": {answer.message}" if answer.message else ""
                return _refused(call, ctx, f"the user did not approve this call{said}")
        result = await registry.execute(call, ctx)
        if self.guards:
            result = await self._screen_result(call, args, ctx, result)
        if self.hooks:
            result = await self._post_hooks(call, args, ctx, result)
        return result

    @property
    def guarded(self) -> bool:
        """Whether the program gave guards (:meth:`screen_model_call`, :meth:`screen_answer`)."""
        return bool(self.guards)

    async def screen_model_call(
        self, messages: list[Message], model: str, ctx: ToolContext
    ) -> tuple[list[Message], str]:
        """The messages a model call sends (as the ``before_model`` guards leave them), and
        why it may not be made (``""``: it may)."""
        checks = named(self.guards, "before_model")
        if not checks:
            return messages, ""
        screened = await screen(checks, messages, lambda m: ModelRequest(tuple(m), model, ctx),
                                (list, tuple))  # fmt: skip
        sent = messages if screened.value is messages else list(screened.value)
        if not screened.refused and not all(isinstance(m, _MESSAGES) for m in sent):
            return messages, "a guard rewrote the model's messages into something else"
        if screened.refused or not screened.asks:
            return sent, screened.refused
        last = sent[-1].content[:PREVIEW] if sent else ""
        asked = {"model": model, "messages": len(sent), "last": last}
        return sent, await self._asked(MODEL_CALL, asked, ctx, "; ".join(screened.asks))

    async def screen_answer(self, content: str, output: Any, ctx: ToolContext) -> tuple[str, str]:
        """The answer to give back (as the ``on_answer`` guards leave it), and why it is
        withheld (``""``: it is not)."""
        checks = named(self.guards, "on_answer")
        if not checks:
            return content, ""
        screened = await screen(checks, content, lambda c: FinalAnswer(c, ctx, output), str)
        if screened.refused or not screened.asks:
            return screened.value, screened.refused
        asked = {"answer": screened.value}
        return screened.value, await self._asked(ANSWER, asked, ctx, "; ".join(screened.asks))

    async def _screen_result(
        self, call: ToolCall, args: dict[str, Any], ctx: ToolContext, result: ToolResultMessage
    ) -> ToolResultMessage:
        """A call's result as the ``after_tool`` guards leave it (withheld: an error)."""
        checks = named(self.guards, "after_tool")
        if not checks:
            return result
        screened = await screen(checks, result.content, lambda c: ToolResponse(
            call.name, args, c, result.is_error, ctx), str)  # fmt: skip
        refused = screened.refused
        if not refused and screened.asks:
            asked = {"tool": call.name, "result": screened.value}
            refused = await self._asked(TOOL_RESULT, asked, ctx, "; ".join(screened.asks))
        if refused:
            return replace(result, content=f"Error: result withheld: {refused}.", is_error=True,
                           parts=())  # fmt: skip
        if screened.value is result.content:
            return result
        return replace(result, content=screened.value)

    async def _asked(self, what: str, args: dict[str, Any], ctx: ToolContext, why: str) -> str:
        """Ask a person about something a guard asks for; "" if allowed, else why not."""
        decision, why = self._no_asking("ask", why)
        if decision == "deny":
            return why
        answer = await self._ask(what, args, ctx, why, forced=True, ruled=False)
        if answer.allow:
            return ""
        return answer.message or "the user did not approve it"

    def _always(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> bool:
        """Whether a person answered "always" for this call earlier in the session tree."""
        found = self._shared.always.match(tool, args, ctx.workspace)
        return found is not None and found[0] == "allow"

    def _sandboxed(self, kind: Kind) -> bool:
        """Whether a command runs in bubblewrap here (only a command's decision asks)."""
        if kind != "command":
            return False
        return bwrap_works() if self.sandboxed is None else self.sandboxed

    def _quick(self, tool: str) -> Decision | None:
        """The decision for any call of ``tool`` when nothing can look at its arguments (no
        rule or hook names it, it edits no file), remembered per name; None: look closer."""
        memo = self._memo.get(tool)
        if memo is not None and memo[0] == self._shared.version:
            return memo[1]
        kind = kind_of(tool)
        decision: Decision | None = None
        if not self.hooks and kind != "edit" and not self._named(tool):
            by_mode: list[Decision] = [
                decide_by_mode(m, kind, sandboxed=self._sandboxed(kind)) for m in self.modes
            ]
            decision = strictest(*by_mode)
        if len(self._memo) >= MEMO_NAMES:
            self._memo.clear()
        self._memo[tool] = (self._shared.version, decision)
        return decision

    def _named(self, tool: str) -> bool:
        """Whether any rule (or "always" answer) names ``tool``."""
        sets = (self.rules, self._shared.always)
        return any(rule_names(r.tool, tool) for rs in sets for r in (*rs.deny, *rs.ask, *rs.allow))

    async def _ask(
        self,
        tool: str,
        args: dict[str, Any],
        ctx: ToolContext,
        why: str,
        call_id: str = "",
        *,
        forced: bool = False,
        ruled: bool = True,
    ) -> Approval:
        """Ask the approver about ``tool`` (a call, or what a guard asks about). ``forced``:
        no mode or rule could lift it; ``ruled``: "always" may add a rule for it."""
        rule = rule_for(tool, args, ctx.workspace) if ruled else None
        if self.approver is None:
            if forced:
                return Approval(False, message=_NOBODY.format(why=why))
            return Approval(False, message=_nobody(self, tool, args, ctx, why, rule))
        request = ApprovalRequest(
            new_request_id(),
            ctx.agent_id,
            ctx.role,
            ctx.depth,
            tool,
            _preview(args),
            why,
            "" if rule is None else rule.text,
            call_id,
            arguments_digest(args),
        )
        emit(ctx.events, APPROVAL_REQUESTED, ctx.agent_id, **request.event_data())
        await notify(ctx, f"Retinue needs your permission to use {tool}", "permission_prompt")
        answer = Approval(False, message="the request was withdrawn")
        try:
            answer = await ask_approver(self.approver, request)
        finally:
            emit(
                ctx.events,
                APPROVAL_ANSWERED,
                ctx.agent_id,
                id=request.id,
                allow=answer.allow,
                always=answer.always,
                cancelled=_cancelling(),
            )
        if answer.allow and answer.always and rule is not None:  # (None: this call only)
            self._shared.add(rule)
        return answer

    async def _pre_hooks(
        self, call: ToolCall, args: dict[str, Any], ctx: ToolContext
    ) -> HookResult:
        if not self.hooks:
            return _NO_VERDICT
        payload = self._payload(ctx, "PreToolUse", tool_name=call.name, tool_input=args)
        return await self.hooks.run("PreToolUse", payload, matcher_value=call.name,
                                    events=ctx.events, agent_id=ctx.agent_id,
                                    mounts=partial(self.sandbox_paths, ctx.workspace))  # fmt: skip

    def _payload(self, ctx: ToolContext, event: str, **fields: Any) -> dict[str, Any]:
        """What a hook reads on stdin (Claude Code's fields, plus the agent's role)."""
        return hook_input(ctx, event, permission_mode=self.mode, **fields)

    async def _post_hooks(
        self, call: ToolCall, args: dict[str, Any], ctx: ToolContext, result: ToolResultMessage
    ) -> ToolResultMessage:
        payload = self._payload(
            ctx,
            "PostToolUse",
            tool_name=call.name,
            tool_input=args,
            tool_response={"content": result.content, "is_error": result.is_error},
        )
        said = await self.hooks.run("PostToolUse", payload, matcher_value=call.name,
                                    events=ctx.events, agent_id=ctx.agent_id,
                                    mounts=partial(self.sandbox_paths, ctx.workspace))  # fmt: skip
        notes = [n for n in (said.reason if said.block else "", said.context) if n]
        if not notes:
            return result
        return replace(result, content=result.content + "\n\n" + "\n".join(notes))


def _protected(args: dict[str, Any], ctx: ToolContext) -> bool:
    """Whether an edit's path is in what runs later (``.claude``, ``.mcp.json``, ``.retinue``,
    ``.git`` of the workspace or of ``$HOME``, or the data directory): then a person is asked
    in every mode. ``~`` is expanded as the file tools expand it; the path is judged as
    written and as the file tools will reach it (a link in the workspace may point at
    ``.claude``), case-folded (:meth:`~retinue.tools.builtin.reach.Places.protected`, which
    the tools ask again when they write)."""
    raw = args.get("file_path") or args.get("notebook_path")
    if not isinstance(raw, str):
        return False
    places = Places.of(ctx)
    joined = os.path.join(places.workspace[0], os.path.expanduser(raw))
    return any(places.protected(p) for p in spellings(joined))


def bwrap_works() -> bool:
    """Whether ``Bash`` runs inside bubblewrap on this machine (its probe runs once a process,
    on the first command decided, not at start-up)."""
    from retinue.tools.builtin.sandbox import BWRAP_ENV, bwrap_problem

    return bwrap_problem(os.environ.get(BWRAP_ENV) or "bwrap") is None


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _under(
    mode: PermissionMode, kind: Kind, found: tuple[Decision, str] | None, *, sandboxed: bool
) -> Decision:
    """One mode's answer, given the rule that matched (if any)."""
    if found is None:
        return decide_by_mode(mode, kind, sandboxed=sandboxed)
    decision = found[0]
    if decision == "ask" and mode == "dontAsk":
        return "deny"
    if decision == "ask":  # never looser than the mode itself unsandboxed (plan runs nothing)
        return strictest("ask", decide_by_mode(mode, kind, sandboxed=False))
    if decision == "allow" and kind in _MODE_DENIES_ALLOW_RULES.get(mode, ()):
        return "deny"
    return decision


def _reason(
    mode: PermissionMode,
    kind: Kind,
    found: tuple[Decision, str] | None,
    decision: Decision,
    tool: str,
) -> str:
    if found is not None and found[0] == decision:
        return f"rule {found[0]}: {found[1]}"
    if mode == "plan" and decision == "deny":
        return "permission mode 'plan' lets an agent read and plan, not change or run anything"
    if mode == "dontAsk" and decision == "deny":
        return f"permission mode 'dontAsk' refuses {tool} unless a rule allows it"
    return f"{tool} needs approval in permission mode '{mode}'"


def _nobody(
    policy: Policy, tool: str, args: dict[str, Any], ctx: ToolContext, why: str, rule: Rule | None
) -> str:
    """The refusal of a call that would ask with nobody to answer, naming only what would let
    this call run: each mode (for the main agent, ``--permission-mode``) under which it is
    allowed, and the allow rule, where adding it would allow it (an ask rule outranks it)."""
    modes = [
        mode
        for mode in ("acceptEdits", "bypassPermissions")
        if replace(policy, modes=(mode, *policy.modes[1:])).decide(tool, args, ctx)[0] == "allow"
    ]
    ways = [f"start with --permission-mode {' or '.join(modes)}"] if modes else []
    if rule is not None:
        rules = RuleSet()
        rules.extend(policy.rules)
        rules.allow_rule(rule)
        if replace(policy, rules=rules).decide(tool, args, ctx)[0] == "allow":
            ways.append(f'add the rule "{rule.text}" to permissions.allow in .claude/settings.json')
    elif policy.rules.match(tool, args, ctx.workspace) is None:
        ways.append(f"add a rule for {tool} to permissions.allow in .claude/settings.json")
    if not ways:
        return (
            f"{why}, and nobody is here to approve it; no mode or allow rule lets it run "
            "without a person's approval (retinue chat asks one)"
        )
    return f"{why}, and nobody is here to approve it. To let it run, {', or '.join(ways)}"


def _preview(args: dict[str, Any]) -> str:
    """The call's arguments as the person asked reads them: compact, and where cut, saying so
    (padding must not push the end of a command out of sight)."""
    text = json.dumps(args, ensure_ascii=False)
    if len(text) <= PREVIEW:
        return text
    return f"{text[:PREVIEW]}… ({len(text) - PREVIEW} more characters not shown)"


def _arguments(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw or "{}")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _refused(call: ToolCall, ctx: ToolContext, why: str) -> ToolResultMessage:
    return refused(call, ctx, f"Error: permission denied: {why}. The call did not run.")
