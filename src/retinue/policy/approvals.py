"""Approvals: a call that needs a person's yes, asked of whoever holds the top.

An :data:`Approver` is what the top of a session tree gives the policy: the terminal's prompt,
the service's :class:`ApprovalBroker` (pending requests a client lists and answers), an MCP
client's elicitation, or a library callback (sync or async; it may answer ``True`` /
``False`` or an :class:`Approval`). Every sub-agent below shares it, so a request raised three
levels down reaches the same place as the main agent's, and the calling turn waits in place
for the answer. A cancelled wait (the turn was interrupted, the session unloaded) withdraws
its request.

An answer kept for later (a request stored over a restart, answered before its turn resumes)
is given only to a request for the same call: :func:`answer_fits` compares the model's call
id, the tool, the full arguments (by :func:`arguments_digest`), the agent's depth and role,
and the rule "always" would add, never the call id alone (models reuse ids such as
``call_0``, and a resumed turn may ask about another call under the same one).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "Approval",
    "ApprovalBroker",
    "ApprovalRequest",
    "Approver",
    "answer_fits",
    "arguments_digest",
    "ask_approver",
]

PREVIEW = 2_000  # characters of a call's arguments shown to the person asked


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One call waiting for a yes or no. ``rule`` is what "always" would allow from now on
    (that call's exact command, file or host; empty: "always" allows this call only)."""

    id: str
    agent_id: str
    role: str
    depth: int
    tool: str
    arguments: str
    reason: str
    rule: str
    call_id: str = ""  # the model's id of the call (a stored request finds its call by it)
    digest: str = ""  # arguments_digest of the call's full arguments ("": not known)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def event_data(self) -> dict[str, Any]:
        """The fields an ``approval_requested`` event carries (its agent is the event's)."""
        data = asdict(self)
        del data["agent_id"]
        return data

    def describe(self) -> str:
        """One line for a person: who wants to do what, and why it asks."""
        who = "the main agent" if self.depth == 0 else f"sub-agent {self.agent_id}"
        return f"{who} wants to run {self.tool} {self.arguments} ({self.reason})"


def arguments_digest(args: Any) -> str:
    """A call's full arguments in one short string (SHA-256 of their canonical JSON): the
    request shows them cut to :data:`PREVIEW` characters, this tells two calls apart."""
    text = json.dumps(args, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def answer_fits(answered: ApprovalRequest, asking: ApprovalRequest) -> bool:
    """Whether the answer given to ``answered`` (kept, say, over a restart) may answer
    ``asking``: the same call of the same agent, seen the same way by the person. False
    when either lacks its call id or digest (an older stored request): ask again."""
    if not (answered.call_id and answered.digest):
        return False
    same = ("call_id", "tool", "digest", "arguments", "depth", "role", "rule")
    return all(getattr(answered, name) == getattr(asking, name) for name in same)


@dataclass(frozen=True, slots=True)
class Approval:
    """The answer. ``always`` adds the request's rule for the rest of the session tree's life;
    ``message`` tells the model why not."""

    allow: bool
    always: bool = False
    message: str = ""


Approver = Callable[[ApprovalRequest], "Awaitable[Approval | bool] | Approval | bool"]

_ids = itertools.count(1)


def new_request_id() -> str:
    return f"approval-{next(_ids)}"


async def ask_approver(approver: Approver, request: ApprovalRequest) -> Approval:
    """Ask ``approver``; a callback that fails counts as a no, with the reason."""
    try:
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = await answer
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return Approval(False, message=f"the approval callback failed: {type(exc).__name__}")
    if isinstance(answer, Approval):
        return answer
    return Approval(bool(answer))


class ApprovalBroker:
    """Pending requests held until a client answers them (HTTP, the web page, a test).

    ``on_change`` is called (with no argument) whenever the pending list changes, so a
    surface can store it or push an event.
    """

    def __init__(self, on_change: Callable[[], None] | None = None) -> None:
        self._pending: dict[str, tuple[ApprovalRequest, asyncio.Future[Approval]]] = {}
        self.on_change = on_change

    async def __call__(self, request: ApprovalRequest) -> Approval:
        future: asyncio.Future[Approval] = asyncio.get_running_loop().create_future()
        self._pending[request.id] = (request, future)
        self._changed()
        try:
            return await future
        finally:
            self._pending.pop(request.id, None)
            self._changed()

    def pending(self) -> list[ApprovalRequest]:
        return [request for request, _ in self._pending.values()]

    def answer(self, request_id: str, approval: Approval) -> bool:
        """Answer one pending request; False when there is no such request (any more)."""
        entry = self._pending.get(request_id)
        if entry is None or entry[1].done():
            return False
        entry[1].set_result(approval)
        return True

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()
