"""The sub-agent caps of a conversation on Temporal, counted by its workflow: the sessions
its whole tree has started in the main agent's running turn, in all, and those open now
(:class:`~retinue.temporal._types.FanOutCounts`, carried across continue-as-new), against
the caps of the worker that checked the session's role (the open activity returns them).
A session of the tree asks the conversation's workflow by the ``admit`` signal before it
opens one and waits for the ``admitted`` answer; a session's close (its ``closed`` state)
or a turn cancelled while it waited (``released``) frees its place. The check and the
refusal's line are :func:`retinue.subagents.caps.over_cap`, the in-process manager's.
A base of the workflow class; deterministic, as workflow code must be.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from retinue.subagents.caps import FanOutLimits, over_cap
    from retinue.temporal._types import Admission, Admitted, FanOutCounts

__all__ = ["FanOutCounting"]


class FanOutCounting:
    """The caps' side of the workflow class (a base of it)."""

    _fanout: FanOutCounts  # the tree's counts (the main agent's)
    _admitted: dict[str, str]  # the answers to this agent's admissions, by token

    @property
    def _root(self) -> str:
        raise NotImplementedError

    @property
    def _is_root(self) -> bool:
        raise NotImplementedError

    async def _signal(self, workflow_id: str, name: str, arg: Any = None) -> None:
        raise NotImplementedError

    async def _admit(self, ask: Admission) -> str:
        """Whether the caps let this agent open a session: "" (it is counted), or why not."""
        if self._is_root:
            return self._count_in(ask)
        await self._signal(self._root, "admit", ask)
        try:
            await workflow.wait_condition(lambda: ask.token in self._admitted)
        except asyncio.CancelledError:  # (the turn was cancelled: it does not open)
            await self._signal(self._root, "released", ask.agent_id)
            raise
        return self._admitted.pop(ask.token)

    def _count_in(self, ask: Admission) -> str:
        counts, caps = self._fanout, ask.caps
        limits = FanOutLimits(caps.per_run, caps.per_conversation, caps.concurrent)
        over = over_cap(limits, ask.role, open_now=len(counts.open), run=counts.run,
                        total=counts.total)  # fmt: skip
        if over is not None:
            return over[2]
        counts.run += 1
        counts.total += 1
        counts.open.append(ask.agent_id)
        return ""

    @workflow.signal
    async def admit(self, ask: Admission) -> None:
        """A session of the conversation asks to open one (the conversation's workflow)."""
        refused = self._count_in(ask)
        await self._signal(ask.reply_to, "admitted", Admitted(ask.token, refused))

    @workflow.signal
    def admitted(self, answer: Admitted) -> None:
        self._admitted[answer.token] = answer.refused

    @workflow.signal
    def released(self, agent_id: str) -> None:
        """A session counted in did not open after all, or has closed."""
        if agent_id in self._fanout.open:
            self._fanout.open.remove(agent_id)
