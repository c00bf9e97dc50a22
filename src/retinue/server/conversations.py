"""The service's conversations: one main agent per conversation id, its turns serialised.

Conversation ``abc`` is served by the main agent ``conv-abc``, so its sub-agents' ids are
``conv-abc/<role>...`` and its events can be told apart from other conversations' by prefix.
Each conversation is a session: deleting it cancels its running turn, and a streaming client
that goes away cancels only its turn, whose cleanup (session consolidation) still finishes.

:class:`Limits` bounds the host: at most ``max_turns`` turns in flight (running or queued)
across all conversations, beyond which a turn is refused at once (:class:`ServerBusy`); and
a conversation without a turn for ``idle_s`` seconds is evicted (closed, as by delete).
"""

from __future__ import annotations

import asyncio
import re
import time
from contextlib import ExitStack
from dataclasses import dataclass

from retinue.engine.config import RunOutput
from retinue.errors import SessionClosedError
from retinue.events import EventSink
from retinue.runtime import Conversation, Runtime
from retinue.server.hub import EventHub

__all__ = [
    "ConversationGone",
    "ConversationHost",
    "Limits",
    "ServerBusy",
    "agent_id_for",
    "valid_conversation_id",
]

_CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class ConversationGone(Exception):
    """The conversation was deleted while this turn waited or ran."""


class ServerBusy(Exception):
    """Too many turns are in flight; this one was refused before it began."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Turns in flight at once (all conversations), and seconds before an idle one goes."""

    max_turns: int = 16
    idle_s: float = 3600.0


def valid_conversation_id(cid: str) -> bool:
    """Letters, digits, ``_ . -``; at most 64 characters; no ``/`` (ids nest by ``/``)."""
    return _CONVERSATION_ID.fullmatch(cid) is not None


def agent_id_for(cid: str) -> str:
    """The main agent id that serves conversation ``cid``."""
    return f"conv-{cid}"


class ConversationHost:
    """Keeps the conversations of one runtime, keyed by conversation id.

    Each conversation is a session (:class:`~retinue.runtime.Conversation`): its turns run in
    arrival order, and deleting it closes it (running turn cancelled, sessions consolidated).
    """

    def __init__(self, runtime: Runtime, hub: EventHub, limits: Limits | None = None) -> None:
        self.runtime = runtime
        self.hub = hub
        self.limits = limits or Limits()
        self._conversations: dict[str, Conversation] = {}
        self._background: set[asyncio.Task[RunOutput]] = set()
        self._in_flight: dict[str, int] = {}  # turns running or queued, per conversation
        self._last_used: dict[str, float] = {}  # monotonic time a turn last began or ended

    def ids(self) -> list[str]:
        return list(self._conversations)

    def running(self, cid: str) -> bool:
        conversation = self._conversations.get(cid)
        return conversation is not None and conversation.session.state == "running"

    def question(self, cid: str) -> str | None:
        """What the main agent of ``cid`` asks the user, while it waits for the answer (the
        conversation's next message)."""
        conversation = self._conversations.get(cid)
        return conversation.session.question if conversation is not None else None

    def message_count(self, cid: str) -> int:
        conversation = self._conversations.get(cid)
        return len(conversation.messages) if conversation else 0

    async def send(
        self, cid: str, text: str, *, keep_sessions: bool = False, on_event: EventSink | None = None
    ) -> RunOutput:
        """Run one main-agent turn in ``cid`` (created on first use), after earlier turns.

        ``on_event`` receives the events of this conversation's agent tree during the turn
        (and asks for text deltas). Raises :class:`ConversationGone` if the conversation is
        deleted meanwhile, :class:`ServerBusy` when too many turns are in flight, and the
        turn's own errors as they are.
        """
        if sum(self._in_flight.values()) >= self.limits.max_turns:
            raise ServerBusy(f"{self.limits.max_turns} turns are already in progress; retry later")
        self._in_flight[cid] = self._in_flight.get(cid, 0) + 1
        self._last_used[cid] = time.monotonic()
        try:
            return await self._send(cid, text, keep_sessions=keep_sessions, on_event=on_event)
        finally:
            self._last_used[cid] = time.monotonic()
            self._in_flight[cid] -= 1
            if not self._in_flight[cid]:
                del self._in_flight[cid]

    async def _send(
        self, cid: str, text: str, *, keep_sessions: bool, on_event: EventSink | None
    ) -> RunOutput:
        conversation = self._conversations.get(cid)
        if conversation is None:
            conversation = self.runtime.conversation(agent_id_for(cid))
            self._conversations[cid] = conversation
        watching = ExitStack()

        def begin() -> None:  # this turn's time has come: its settings, its subscriber
            conversation.keep_sessions = keep_sessions
            conversation.stream = on_event is not None
            if on_event is not None:
                watching.enter_context(self.hub.subscribe(agent_id_for(cid), on_event))

        with watching:
            try:
                out = await conversation.send(text, on_start=begin)
            except SessionClosedError:
                raise ConversationGone(f"conversation {cid!r} was deleted") from None
        if out.stop_reason == "interrupted" and conversation.session.state in ("closing", "closed"):
            raise ConversationGone(f"conversation {cid!r} was deleted during this turn")
        return out

    def start(
        self, cid: str, text: str, *, keep_sessions: bool = False, on_event: EventSink | None = None
    ) -> asyncio.Task[RunOutput]:
        """:meth:`send` as a task the host keeps alive until it is done (for streaming)."""
        task = asyncio.create_task(
            self.send(cid, text, keep_sessions=keep_sessions, on_event=on_event)
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def delete(self, cid: str) -> list[str] | None:
        """Forget ``cid``: cancel its running turn, end its sessions (consolidated).

        Returns the ids of the sessions it ended, or None if there is no such conversation.
        """
        conversation = self._conversations.pop(cid, None)
        self._last_used.pop(cid, None)
        if conversation is None:
            return None
        return await conversation.close()

    async def evict_idle(self, now: float | None = None) -> list[str]:
        """Close the conversations with no turn in flight for ``limits.idle_s``; their ids."""
        now = time.monotonic() if now is None else now
        idle = [
            cid
            for cid in list(self._conversations)
            if cid not in self._in_flight
            and now - self._last_used.get(cid, now) >= self.limits.idle_s
        ]
        evicted = []
        for cid in idle:
            if cid not in self._in_flight:  # no turn began while an earlier one closed
                await self.delete(cid)
                evicted.append(cid)
        return evicted

    async def evict_forever(self) -> None:
        """Evict idle conversations every little while (a task of the app's lifespan)."""
        while True:
            await asyncio.sleep(min(max(self.limits.idle_s / 4, 0.05), 60.0))
            await self.evict_idle()

    async def close_all(self) -> None:
        """End every conversation (the service is stopping)."""
        for cid in list(self._conversations):
            await self.delete(cid)
        if self._background:
            await asyncio.wait(set(self._background))
