"""One live interactive sub-agent session and what can be seen of it from outside."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Literal

from retinue.engine.config import RunConfig, RunOutput
from retinue.messages import Usage
from retinue.subagents.roles import Role

__all__ = ["Session", "SessionInfo", "SessionState", "conversation_id"]

SessionState = Literal["idle", "running", "closing"]


def conversation_id(parent_id: str, role: str, instance: str | None = None) -> str:
    """``parent/role`` or ``parent/role:instance``: one session per key under one parent."""
    base = f"{parent_id}/{role}"
    return f"{base}:{instance}" if instance else base


@dataclass(eq=False, slots=True)
class Session:
    """An interactive sub-agent kept alive between its parent's messages.

    ``config.messages`` is the whole history (every user turn, reply, tool call and result);
    each turn extends it in place. ``lock`` serialises turns in arrival order (asyncio's lock
    wakes waiters first-in, first-out); it is never needed by anything the turn itself calls,
    so nested spawns, sends and unloads cannot deadlock on it.
    """

    id: str
    role: Role
    parent_id: str
    instance: str | None
    config: RunConfig
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[object] | None = None
    jobs: set[asyncio.Task[RunOutput]] = field(default_factory=set)  # background turns
    inbox: list[str] = field(default_factory=list)  # their replies, not yet polled
    started: bool = False
    closed: bool = False
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    last_reply: str = ""
    created_at: float = field(default_factory=time.time)

    @property
    def state(self) -> SessionState:
        if self.closed:
            return "closing"
        return "running" if self.task is not None and not self.task.done() else "idle"

    def info(self) -> SessionInfo:
        return SessionInfo(
            id=self.id,
            role=self.role.name,
            parent_id=self.parent_id,
            instance=self.instance,
            state=self.state,
            turns=self.turns,
            messages=len(self.config.messages),
            input_tokens=self.usage.input_tokens,
            output_tokens=self.usage.output_tokens,
            last_reply=self.last_reply,
            created_at=self.created_at,
            background=len(self.jobs),
            unread=len(self.inbox),
        )


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

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens
