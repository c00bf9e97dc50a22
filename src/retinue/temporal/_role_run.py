"""A one-shot run of a role, held by the conversation workflow itself: the ``run_role``
Update, for the OpenAI-compatible endpoint's ``retinue/<role>`` models.

A front end starts a conversation's workflow with this Update (Temporal's update-with-start:
one request, so nothing is started that is not run). The workflow opens the role's session
as its main agent's ``SubAgent`` call would (:meth:`Sessions._open`: the open activity checks
the role before any model call, and the caps count it), sends it the task after the role's
``initialPrompt`` (as in-process: ``SessionFactory.first_turn``), and the run's reply is the
Update's. Then the conversation closes itself, whatever the reply: the run closes after its
reply (consolidated once), and one that asked a question is ended by the close, as the
in-process endpoint's ``cleanup`` ends it. The close is the workflow's own, not its caller's,
so a front end that dies mid-run leaves nothing open. Deterministic, as workflow code must be.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from retinue.subagents.roles import valid_name, with_initial_prompt
    from retinue.temporal._calls import Delegation
    from retinue.temporal._types import ChildRef, Json, Reply, Spent, TurnReply

__all__ = ["RoleRuns", "RoleTask"]


@dataclass(frozen=True, slots=True)
class RoleTask:
    """The ``run_role`` Update's argument: the role to run once, and its task."""

    role: str
    task: str


class RoleRuns:
    """The ``retinue/<role>`` run of a conversation workflow (a mixin of it)."""

    _closed: bool
    _opened: int
    _messages: list[Json]
    _children: dict[str, ChildRef]

    @property
    def _is_root(self) -> bool:
        raise NotImplementedError

    def _check_send(self, text: str) -> None:
        raise NotImplementedError

    async def _open(self, key: str, ask: Delegation) -> tuple[ChildRef, str] | str:
        raise NotImplementedError

    async def _message(self, child: ChildRef, text: str, token: str) -> Reply:
        raise NotImplementedError

    @workflow.update
    async def run_role(self, ask: RoleTask) -> TurnReply:
        """Run ``ask.role`` once on ``ask.task`` (this conversation's one session), then
        close the conversation. A task or role that is refused, or a role that may not
        start here (unknown, or past the caps), fails the Update before any model call; a
        run whose turn failed fails it with its ``Stopped: ...`` reason."""
        try:
            reply = await self._run_once(ask)
        finally:
            self._closed = True  # (the conversation ends with its run, however it ended)
        if reply.stop_reason == "failed":
            raise ApplicationError(reply.content.removeprefix("Error: "), non_retryable=True)
        spent = reply.spent or Spent()  # (the run's: the main agent took no step)
        return TurnReply(reply.content, reply.stop_reason, 0, spent)

    @run_role.validator
    def _check_run_role(self, ask: RoleTask) -> None:
        """Only a new conversation takes a run (the rest is checked in the Update, whose
        end closes the conversation: a new one started with a refused Update would stay
        open)."""
        if not self._is_root or self._opened or self._messages or self._closed:
            raise ValueError("a role runs once, in a new conversation of its own")

    async def _run_once(self, ask: RoleTask) -> Reply:
        """Open the run and send it the task; its reply. A run that answered closes itself
        (the conversation's close waits for it: :meth:`Sessions._message` counts it
        closing); one that asked is held, for the close to end; one whose workflow is gone
        is forgotten."""
        try:
            self._check_send(ask.task)  # (empty, too large: as a message is refused)
        except ValueError as exc:
            raise ApplicationError(str(exc), non_retryable=True) from None
        if not valid_name(ask.role):
            raise ApplicationError(f"role {ask.role[:80]!r}: use letters, digits, '_', '.', '-'",
                                   non_retryable=True)  # fmt: skip
        key = f"{workflow.info().workflow_id}/run_role"
        opened = await self._open(key, Delegation(ask.task, ask.role, False, None))
        if isinstance(opened, str):  # (unknown role, or the caps: no model call was made)
            raise ApplicationError(opened, non_retryable=True)
        child, prompt = opened
        reply = await self._message(child, with_initial_prompt(prompt, ask.task), key)
        if reply.stop_reason != "asking":
            self._children.pop(child.agent_id, None)
        return reply
