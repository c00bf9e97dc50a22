"""Messages between sessions of one parent tree (``SendMessage``).

A session may message a sibling (same parent), its parent (``"parent"``; ``"main"`` is the
tree's main agent), one of its own children, or any session of its tree by id; never a
session of another tree or tenant. A message is delivered the way steering is: between the
receiver's tool calls if it is working (:meth:`Session.steer`), as a background turn if it is
idle (:meth:`Session.start`, whose reply waits in its inbox). The receiver reads who sent it.

``wait=True`` returns the receiver's reply: the reply of its running turn when it was working,
else of the turn the message started. Waits form a graph (sender → receiver); a wait that
would close a cycle is refused with an error, and so is a wait on an ancestor that is working
(its turn may itself be waiting for the sender's). Messages are bounded in size
(:data:`MAX_MESSAGE_CHARS`) and rate (:data:`MAX_PER_MINUTE` per sender).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque

from retinue.engine.session import ASKS_NOTE, Session
from retinue.errors import SubAgentError
from retinue.subagents.registry import SessionKey, SessionRegistry

__all__ = ["MAX_MESSAGE_CHARS", "MAX_PER_MINUTE", "Messenger", "messenger_of"]

MAX_MESSAGE_CHARS = 8_000
MAX_PER_MINUTE = 20
MESSAGE_NOTE = "[message from {sender}: {text}]\n[reply with SendMessage(to={sender!r}) if needed]"


class Messenger:
    """Routes messages among the sessions of one registry (see the module docstring)."""

    def __init__(self, registry: SessionRegistry) -> None:
        self.registry = registry
        # main agents' sessions (not in the registry), by (tenant, id); closed ones are
        # dropped as the table grows (a Session takes no weak reference)
        self._roots: dict[tuple[str, str], Session] = {}
        self._prune_at = 256
        self._sent: dict[str, deque[float]] = {}
        self._waits: dict[str, str] = {}  # sender id -> receiver id, while it waits

    def saw(self, tenant: str, session: Session | None) -> None:
        """Remember a session that is not a registered sub-agent (a main agent's)."""
        if session is None or self.registry.by_id(session.id) is not None:
            return
        self._roots[(tenant, session.id)] = session
        if len(self._roots) >= self._prune_at:
            self._roots = {k: s for k, s in self._roots.items() if s.state != "closed"}
            self._prune_at = max(256, 2 * len(self._roots))

    def waiting(self) -> dict[str, str]:
        """Who waits for whose reply now (sender id -> receiver id)."""
        return dict(self._waits)

    # -- the tree --------------------------------------------------------------------

    def parent_of(self, agent_id: str) -> str | None:
        held = self.registry.by_id(agent_id)
        if held is not None:
            return held.parent_id
        head, _, last = agent_id.rpartition("/")
        return head if head and "#" in last else None  # a one-shot sub-agent: parent/role#n

    def root_of(self, agent_id: str) -> str:
        seen = 0
        while (up := self.parent_of(agent_id)) is not None and seen < 64:
            agent_id, seen = up, seen + 1
        return agent_id

    def _ancestors(self, agent_id: str) -> set[str]:
        out: set[str] = set()
        while (up := self.parent_of(agent_id)) is not None and up not in out:
            out.add(up)
            agent_id = up
        return out

    def resolve(self, tenant: str, sender: str, to: str) -> Session:
        """The session ``to`` names, seen from ``sender``; refused outside its tree."""
        to = to.strip()
        parent = self.parent_of(sender)
        if to == "main":
            target = self.root_of(sender)
        elif to == "parent":
            if parent is None:
                raise SubAgentError("the main agent has no parent to message")
            target = parent
        elif "/" not in to:
            role, _, instance = to.partition(":")
            keys = [SessionKey.of(p, role, instance) for p in (parent, sender) if p is not None]
            found = next((k.id for k in keys if self.registry.get(k) is not None), None)
            if found is None:
                raise SubAgentError(self._unknown(to, sender, parent))
            target = found
        else:
            target = to
        session = self._session(tenant, target)
        if session is None or self.root_of(target) != self.root_of(sender):
            raise SubAgentError(self._unknown(to, sender, parent))
        if session.id == sender:
            raise SubAgentError("that is yourself: message another session")
        return session

    def _session(self, tenant: str, cid: str) -> Session | None:
        held = self.registry.by_id(cid)
        if held is not None:
            return held.session if held.session.config.context.tenant == tenant else None
        root = self._roots.get((tenant, cid))
        return root if root is not None and root.state != "closed" else None

    def _unknown(self, to: str, sender: str, parent: str | None) -> str:
        near = [h.id for p in (parent, sender) if p for h in self.registry.held_by(p)]
        near = [i for i in near if i != sender]
        return (
            f"no session {to!r} in your team: message 'main', 'parent', a sibling or child "
            f"by role[:instance], or one of: {', '.join(near) or 'none'}"
        )

    # -- sending ---------------------------------------------------------------------

    def _admit(self, sender: str, text: str) -> None:
        if not text.strip():
            raise SubAgentError("the message is empty: say something")
        if len(text) > MAX_MESSAGE_CHARS:
            raise SubAgentError(
                f"a message of {len(text):,} characters is over the limit of "
                f"{MAX_MESSAGE_CHARS:,}: shorten it, or put the details in a file and name it"
            )
        now = time.monotonic()
        if len(self._sent) >= 1024:  # forget senders quiet for a minute (ended sessions)
            self._sent = {k: d for k, d in self._sent.items() if d and now - d[-1] < 60}
        sent = self._sent.setdefault(sender, deque())
        while sent and now - sent[0] >= 60:
            sent.popleft()
        if len(sent) >= MAX_PER_MINUTE:
            raise SubAgentError(
                f"{sender} sent {MAX_PER_MINUTE} messages in the last minute, the limit: "
                "wait, or do the work yourself"
            )
        sent.append(now)

    async def send(
        self, tenant: str, sender: str, to: str, text: str, *, wait: bool = False
    ) -> str:
        """Deliver ``text`` from ``sender`` to ``to``; with ``wait`` return the reply."""
        receiver = self.resolve(tenant, sender, to)
        rid = receiver.id
        if receiver.state in ("closing", "closed"):
            raise SubAgentError(f"session {rid} has ended")
        if receiver.state == "asking":
            raise SubAgentError(
                f"session {rid} is waiting for its parent's answer to a question; message "
                "it later (your message would be taken as that answer)"
            )
        if wait:
            self._check_wait(sender, receiver)
        self._admit(sender, text)
        note = MESSAGE_NOTE.format(sender=sender, text=text)
        if not wait:
            if receiver.steer(note):
                return f"[message delivered to {rid}: it sees it before its next step]"
            receiver.start(note)
            return f"[message delivered to {rid}: it was idle and works on it now]"
        self._waits[sender] = rid
        try:
            shown = receiver.steered
            if receiver.steer(note):
                return await self._running_reply(receiver, shown)
            turn = asyncio.ensure_future(receiver.send(note))
            out = await asyncio.shield(turn)  # a sender that stops waiting ends no turn
            if out.asking:
                return ASKS_NOTE.format(id=rid, question=out.content)
            return f"[reply from {rid}]\n{out.content}"
        finally:
            if self._waits.get(sender) == rid:
                del self._waits[sender]

    def _check_wait(self, sender: str, receiver: Session) -> None:
        rid, chain = receiver.id, [sender, receiver.id]
        at = rid
        while (nxt := self._waits.get(at)) is not None and len(chain) < 64:
            chain.append(nxt)
            if nxt == sender:
                raise SubAgentError(
                    "waiting for this reply would deadlock ("
                    + " waits for ".join(chain)
                    + "): send it without wait=true, or reply to the message you got"
                )
            at = nxt
        if rid in self._ancestors(sender):  # idle now, it may start a turn that waits on you
            raise SubAgentError(
                f"{rid} holds your session and may wait for you: send it without wait=true, "
                "or finish your turn (your reply reaches it)"
            )

    @staticmethod
    async def _running_reply(receiver: Session, shown: int) -> str:
        """The reply of the turn running now (the first of its turns to finish); ``shown``:
        how many steering messages it had been shown before this one."""
        turns = receiver.tasks()
        if not turns:
            return f"[message delivered to {receiver.id}; its turn ended before a reply]"
        while not any(t.done() for t in turns):  # (cancels none)
            if receiver.question is not None:  # it asks its parent: no reply comes before
                return ASKS_NOTE.format(id=receiver.id, question=receiver.question)
            await asyncio.wait(turns, timeout=_ASK_POLL_S, return_when=asyncio.FIRST_COMPLETED)
        finished = next(t for t in turns if t.done())
        if finished.cancelled():
            return f"[message delivered to {receiver.id}; its turn was interrupted]"
        exc = finished.exception()
        if exc is not None:
            return f"[message delivered to {receiver.id}; its turn failed: {exc}]"
        if receiver.steered == shown:  # its last model call came before the message
            return (
                f"[message delivered to {receiver.id}; its turn ended before it saw it, so it "
                "goes with its next message (no reply to wait for now)]"
            )
        return f"[reply from {receiver.id}]\n{finished.result().content}"


_ASK_POLL_S = 0.05
"""How often a wait for a working session's reply looks whether it asks instead."""

_messengers: weakref.WeakKeyDictionary[SessionRegistry, Messenger] = weakref.WeakKeyDictionary()


def messenger_of(registry: SessionRegistry) -> Messenger:
    """The messenger of ``registry``'s sessions (one per registry)."""
    messenger = _messengers.get(registry)
    if messenger is None:
        messenger = _messengers[registry] = Messenger(registry)
    return messenger
