"""The service's conversations: one main agent per conversation id, its turns serialised.

Conversation ``abc`` is served by the main agent ``conv-abc``, so its sub-agents' ids are
``conv-abc/<role>...`` and its events can be told apart from other conversations' by prefix.
Each turn runs in a task of its own: deleting a conversation cancels its running turn, and a
streaming client that goes away cancels only its turn, which then finishes its cleanup
(session consolidation) in the background.
"""

from __future__ import annotations

import asyncio
import re
from contextlib import nullcontext
from dataclasses import dataclass, field

from retinue._tasks import cancel_and_wait, wait_owned
from retinue.engine.config import RunOutput
from retinue.events import EventSink
from retinue.runtime import Conversation, Runtime
from retinue.server.hub import EventHub

__all__ = ["ConversationGone", "ConversationHost", "agent_id_for", "valid_conversation_id"]

_CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class ConversationGone(Exception):
    """The conversation was deleted while this turn waited or ran."""


def valid_conversation_id(cid: str) -> bool:
    """Letters, digits, ``_ . -``; at most 64 characters; no ``/`` (ids nest by ``/``)."""
    return _CONVERSATION_ID.fullmatch(cid) is not None


def agent_id_for(cid: str) -> str:
    """The main agent id that serves conversation ``cid``."""
    return f"conv-{cid}"


@dataclass(eq=False, slots=True)
class _Entry:
    conversation: Conversation
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    turn: asyncio.Task[RunOutput] | None = None
    closed: bool = False


class ConversationHost:
    """Keeps the conversations of one runtime, keyed by conversation id."""

    def __init__(self, runtime: Runtime, hub: EventHub) -> None:
        self.runtime = runtime
        self.hub = hub
        self._entries: dict[str, _Entry] = {}
        self._background: set[asyncio.Task[RunOutput]] = set()

    def ids(self) -> list[str]:
        return list(self._entries)

    def running(self, cid: str) -> bool:
        entry = self._entries.get(cid)
        return entry is not None and entry.turn is not None and not entry.turn.done()

    def message_count(self, cid: str) -> int:
        entry = self._entries.get(cid)
        return len(entry.conversation.messages) if entry else 0

    async def send(
        self, cid: str, text: str, *, keep_sessions: bool = False, on_event: EventSink | None = None
    ) -> RunOutput:
        """Run one main-agent turn in ``cid`` (created on first use), after earlier turns.

        ``on_event`` receives the events of this conversation's agent tree during the turn
        (and asks for text deltas). Raises :class:`ConversationGone` if the conversation is
        deleted meanwhile, and the turn's own errors as they are.
        """
        entry = self._entries.get(cid)
        if entry is None:
            conversation = self.runtime.conversation(agent_id_for(cid))
            entry = self._entries[cid] = _Entry(conversation)
        async with entry.lock:
            if entry.closed:
                raise ConversationGone(f"conversation {cid!r} was deleted")
            entry.conversation.keep_sessions = keep_sessions
            entry.conversation.stream = on_event is not None
            watch = self.hub.subscribe(agent_id_for(cid), on_event) if on_event else nullcontext()
            with watch:
                return await self._run(entry, text, cid)

    async def _run(self, entry: _Entry, text: str, cid: str) -> RunOutput:
        turn = asyncio.create_task(entry.conversation.send(text), name=f"turn of {cid}")
        entry.turn = turn
        try:
            await wait_owned(turn)
        finally:
            entry.turn = None
        if turn.cancelled():
            raise ConversationGone(f"conversation {cid!r} was deleted during this turn")
        return turn.result()

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
        entry = self._entries.pop(cid, None)
        if entry is None:
            return None
        entry.closed = True
        held = [s.id for s in self.runtime.manager.sessions(agent_id_for(cid))]
        if entry.turn is not None:
            await cancel_and_wait(entry.turn)
        ended = await entry.conversation.close()
        return list(dict.fromkeys([*held, *ended]))

    async def close_all(self) -> None:
        """End every conversation (the service is stopping)."""
        for cid in list(self._entries):
            await self.delete(cid)
        if self._background:
            await asyncio.wait(set(self._background))
