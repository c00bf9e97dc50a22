"""The ownership tree of interactive sessions: which parent holds which session.

Sessions are keyed structurally by ``(parent agent id, role, instance)``; the display id
``parent/role[:instance]`` is derived from the key, and since role and instance names may not
contain ``/`` or ``:``, two keys never share an id. A session stays registered while it
closes (so a second unload or cleanup waits for the same close) and leaves when it is closed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from retinue._deprecated import module_aliases
from retinue._tasks import finish
from retinue.engine.session import Session, SessionState
from retinue.errors import SubAgentError
from retinue.subagents.roles import Role, valid_name
from retinue.tools.builtin.todo import TodoItem, load_todos

__all__ = [
    "Held",
    "HoldsSessions",
    "SessionInfo",
    "SessionKey",
    "SessionRegistry",
    "agent_id",
    "registry_of",
]


class SessionKey(NamedTuple):
    parent_id: str
    role: str
    instance: str | None = None

    @classmethod
    def of(cls, parent_id: str, role: str, instance: str | None = None) -> SessionKey:
        """The key, with ``instance`` checked like a role name (``""`` means none)."""
        if instance and not valid_name(instance):
            raise SubAgentError(
                f"invalid instance name {instance!r}: use letters, digits, '_', '-', '.' "
                "(at most 64 characters), as for role names"
            )
        return cls(parent_id, role, instance or None)

    @property
    def id(self) -> str:
        base = f"{self.parent_id}/{self.role}"
        return f"{base}:{self.instance}" if self.instance else base


def agent_id(parent_id: str, role: str, instance: str | None = None) -> str:
    """The agent id of a session: ``parent/role`` or ``parent/role:instance``, one session
    per key under one parent (``conversation_id`` is its deprecated name)."""
    return SessionKey.of(parent_id, role, instance).id


@runtime_checkable
class HoldsSessions(Protocol):
    """A sub-agent manager as the team tools see it: the ownership tree it keeps
    (:class:`~retinue.subagents.manager.SubAgentManager` is one)."""

    @property
    def registry(self) -> SessionRegistry: ...


def registry_of(manager: object) -> SessionRegistry | None:
    """The session tree of ``manager`` (a :class:`~retinue.tools.base.ToolContext`'s), or
    None when it keeps none (no manager, or a program's own :class:`Delegator`)."""
    return manager.registry if isinstance(manager, HoldsSessions) else None


@dataclass(eq=False, slots=True)
class Held:
    """One registered session and who holds it."""

    key: SessionKey
    role: Role
    session: Session
    created_at: float = field(default_factory=time.time)

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def parent_id(self) -> str:
        return self.key.parent_id

    def info(self) -> SessionInfo:
        s = self.session
        return SessionInfo(
            id=s.id,
            role=self.role.name,
            parent_id=self.key.parent_id,
            instance=self.key.instance,
            state=s.state,
            turns=s.turns,
            messages=len(s.messages),
            input_tokens=s.usage.input_tokens,
            output_tokens=s.usage.output_tokens,
            last_reply=s.last_reply,
            created_at=self.created_at,
            background=s.background,
            unread=len(s.inbox),
            question=s.question,
            steered=s.steered,
            todos=tuple(load_todos(s.config.context.data_dir, s.id, since=self.created_at)),
            cost_usd=s.cost_usd,
        )


class SessionRegistry:
    """Live sessions by key and by id; get-or-create; cleanup of everything a parent holds."""

    def __init__(self) -> None:
        self._by_key: dict[SessionKey, Held] = {}
        self._by_id: dict[str, Held] = {}
        self._by_parent: dict[str, dict[SessionKey, Held]] = {}

    def get(self, key: SessionKey) -> Held | None:
        return self._by_key.get(key)

    def by_id(self, cid: str) -> Held | None:
        return self._by_id.get(cid)

    def held_by(self, parent_id: str | None = None) -> list[Held]:
        """Sessions ``parent_id`` holds (all if None), oldest first."""
        if parent_id is None:
            return list(self._by_key.values())
        return list(self._by_parent.get(parent_id, {}).values())

    def get_or_create(self, key: SessionKey, create: Callable[[], Held]) -> tuple[Held, bool]:
        """The session at ``key``, made by ``create()`` if there is none; and whether it was."""
        held = self._by_key.get(key)
        if held is not None:
            return held, False
        held = create()
        self._by_key[key] = self._by_id[held.id] = held
        self._by_parent.setdefault(key.parent_id, {})[key] = held
        return held, True

    def forget(self, held: Held) -> None:
        """Called once a session is closed."""
        if self._by_key.get(held.key) is held:
            del self._by_key[held.key]
            self._by_id.pop(held.id, None)
            siblings = self._by_parent[held.key.parent_id]
            del siblings[held.key]
            if not siblings:
                del self._by_parent[held.key.parent_id]

    async def cleanup(self, parent_id: str) -> list[str]:
        """Close every session ``parent_id`` holds and wait until they are closed.

        Every close begins before anything awaits, and the wait outlasts a cancellation of
        the caller (which then propagates), so none is lost or left half done.
        """
        mine = self.held_by(parent_id)
        closes = [h.session.closing() for h in mine]
        if closes:
            await finish(asyncio.gather(*closes, return_exceptions=True))
        return [h.id for h in mine]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str
    role: str
    parent_id: str
    instance: str | None
    state: SessionState
    turns: int
    messages: int
    input_tokens: int
    output_tokens: int
    last_reply: str
    created_at: float
    background: int = 0  # background turns still to finish
    unread: int = 0  # finished background replies the parent has not polled
    question: str | None = None  # what it asks, while its state is "asking"
    steered: int = 0  # steering messages it was shown
    todos: tuple[TodoItem, ...] = ()  # its TodoWrite task list, as it last wrote it
    cost_usd: float | None = None  # US dollars; None: its model's price is unknown

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


if TYPE_CHECKING:  # the deprecated name, for type checkers (at run time it warns)
    conversation_id = agent_id
else:
    __getattr__ = module_aliases(__name__, {"conversation_id": "agent_id"})
