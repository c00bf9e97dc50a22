"""A remote A2A agent as a role's model: a role file that says ``a2a: <url>`` runs its
sessions on that agent instead of a local model, so to its parent it is a role like any other.

Each session gets its own :class:`RemoteAgent` (its A2A context): a turn's message is sent to
the context and the remote reply is the turn's answer. A remote ``input-required`` becomes
an ``AskParent`` call, so the parent reads ``[session … asks: …]`` as from any sub-agent, and
its answer is sent to the waiting task. :func:`end_remote` (the session's close) cancels a
task still waiting and forgets the context. The remote agent is untrusted: every call is
bounded in time (``timeout``), its replies and questions in size, and it is sent only the
message text and the ``Authorization`` header taken from the role's ``a2aAuthEnv``
environment variable, never a provider key; a role file inside the workspace that names a
remote agent needs the user's approval first (:func:`remote_agent`). It is a model adapter,
so it lives in :mod:`retinue.llm`, at the layer of :mod:`retinue.policy` (whose trust store it
asks), below the sub-agent factory that uses it; the server side (:mod:`retinue.a2a.server`)
is a surface.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from retinue.errors import ModelError, UntrustedError
from retinue.llm.base import ModelResponse, TextCallback, ToolSpec
from retinue.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from retinue.policy.trust import Definition, TrustStore, needs_trust, printable

__all__ = [
    "MAX_REPLY",
    "A2ARemote",
    "RemoteAgent",
    "definition",
    "end_remote",
    "parse_remote",
    "remote_agent",
]

MAX_REPLY = 100_000  # characters of a remote reply that reach the parent
MAX_QUESTION = 2_000  # characters of a remote question
ASK_TOOL = "AskParent"  # (retinue.subagents.tools.ASK_TOOL_NAME; this layer cannot import it)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


@dataclass(frozen=True, slots=True)
class A2ARemote:
    """A role's remote agent: its URL (the agent card's base), the environment variable
    whose value is sent as ``Authorization: Bearer …`` (none: no header), the time bound of
    one call in seconds."""

    url: str
    auth_env: str | None = None
    timeout: float = 300.0


def parse_remote(url: object, auth_env: object) -> A2ARemote | str:
    """The remote of a role file's ``a2a`` / ``a2aAuthEnv``, or why it is not one."""
    if not isinstance(url, str) or not re.fullmatch(r"https?://[^\s]{1,2000}", url):
        return f"a2a {url!r} is not an http(s) URL"
    if auth_env is not None and (
        not isinstance(auth_env, str) or not _ENV_NAME.fullmatch(auth_env)
    ):
        return f"a2aAuthEnv {auth_env!r} is not an environment variable name"
    return A2ARemote(url, auth_env if isinstance(auth_env, str) else None)


def definition(role: str, remote: A2ARemote, source: Path) -> Definition:
    """What approving a workspace role file's remote agent approves (see
    :mod:`retinue.policy.trust`): the role, its URL, the name of its header's variable."""
    keys = (remote.auth_env,) if remote.auth_env else ()
    return Definition("a2a", role, remote.url, (), keys, source)


def remote_agent(
    role: str, remote: A2ARemote, source: Path | None, workspace: Path, data_dir: Path
) -> RemoteAgent:
    """A session's remote agent; a role file inside the workspace must have been approved
    (``retinue a2a approve``): a cloned repository must not send the user's messages, or a
    token from the environment, to a URL of its choosing."""
    if source is not None:
        d = definition(role, remote, source)
        if needs_trust(d, workspace, data_dir) and not TrustStore(data_dir).is_trusted(d):
            raise UntrustedError(printable(
                f"{source}: role {role!r} names the remote A2A agent {remote.url}, which is not "
                f"approved; to allow it: retinue a2a approve {shlex.quote(role)}"
            ))  # fmt: skip
    return RemoteAgent(remote)


class RemoteAgent:
    """One session's A2A context with the remote agent, seen as a model (see the module)."""

    def __init__(self, remote: A2ARemote) -> None:
        self.remote = remote
        self.context_id: str | None = None
        self.waiting_task: str | None = None  # a task in input-required
        self._client: Any = None
        self._http: httpx.AsyncClient | None = None

    @property
    def name(self) -> str:
        return f"a2a:{self.remote.url}"

    async def _connect(self) -> Any:
        if self._client is None:
            from a2a.client import ClientConfig, ClientFactory

            headers = {}
            if self.remote.auth_env:
                secret = os.environ.get(self.remote.auth_env, "")
                if secret:
                    headers["Authorization"] = f"Bearer {secret}"
            self._http = httpx.AsyncClient(headers=headers, timeout=self.remote.timeout,
                                           follow_redirects=False)  # fmt: skip
            config = ClientConfig(httpx_client=self._http, streaming=False)
            self._client = await ClientFactory(config).create_from_url(self.remote.url)
        return self._client

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> ModelResponse:
        """Send the turn's message (or the parent's answer) and map the remote's reply."""
        last = messages[-1] if messages else None
        if isinstance(last, ToolResultMessage) and last.name == ASK_TOOL and self.waiting_task:
            text, task_id = last.content, self.waiting_task
        elif isinstance(last, UserMessage):
            text, task_id = last.content, None
        else:  # the loop asks again after a tool of its own: the remote has answered already
            return ModelResponse(AssistantMessage("(the remote agent has nothing to add)"))
        try:
            state, reply, context_id, task = await self._send(text, task_id)
        except ModelError:
            raise
        except Exception as exc:  # the remote's failure, a timeout, a bad card: one line
            reason = (
                str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
            )
            raise ModelError(f"remote A2A agent {self.remote.url} failed: {reason}") from None
        self.context_id = context_id or self.context_id
        if state == "input-required":
            self.waiting_task = task
            call = ToolCall(
                f"a2a-{uuid.uuid4().hex[:12]}",
                ASK_TOOL,
                json.dumps({"question": reply[:MAX_QUESTION] or "(no question)"}),
            )
            return ModelResponse(AssistantMessage("", (call,)), Usage(requests=1), "tool_calls")
        self.waiting_task = None
        if state not in ("completed", "message"):
            reply = f"[the remote agent's task ended {state}] {reply}".strip()
        if on_text is not None and reply:
            on_text(reply)
        return ModelResponse(AssistantMessage(reply), Usage(requests=1))

    async def _send(self, text: str, task_id: str | None) -> tuple[str, str, str, str]:
        """``(state, text, context id, task id)`` of the remote's answer to ``text``."""
        import asyncio

        from a2a.types import Message as A2AMessage
        from a2a.types import Part, Role, SendMessageRequest, TaskState

        client = await self._connect()
        message = A2AMessage(message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
                             parts=[Part(text=text)], context_id=self.context_id or "",
                             task_id=task_id or "")  # fmt: skip
        result: tuple[str, str, str, str] | None = None
        async with asyncio.timeout(self.remote.timeout):
            async for event in client.send_message(SendMessageRequest(message=message)):
                if event.HasField("message"):
                    m = event.message
                    result = ("message", _text(m.parts), m.context_id, m.task_id)
                elif event.HasField("task"):
                    t = event.task
                    state = TaskState.Name(t.status.state).removeprefix("TASK_STATE_")
                    said = _text(t.status.message.parts) or _text(
                        p for a in t.artifacts for p in a.parts
                    )
                    result = (state.lower().replace("_", "-"), said, t.context_id, t.id)
        if result is None:
            raise ModelError(f"remote A2A agent {self.remote.url} gave no answer")
        return result

    async def end(self) -> None:
        """End the context: cancel a task still waiting for input, close the connection."""
        client, self._client = self._client, None
        waiting, self.waiting_task, self.context_id = self.waiting_task, None, None
        try:
            if client is not None and waiting:
                import asyncio

                from a2a.types import CancelTaskRequest

                async with asyncio.timeout(min(self.remote.timeout, 30)):
                    await client.cancel_task(CancelTaskRequest(id=waiting))
        except Exception:  # the remote may be gone already: the context is ended either way
            pass
        finally:
            if self._http is not None:
                await self._http.aclose()
                self._http = None


def _text(parts: Any) -> str:
    return "\n".join(p.text for p in parts if p.text)[:MAX_REPLY]


async def end_remote(model: object) -> None:
    """End a session's remote context if its model is a remote agent (else nothing)."""
    if isinstance(model, RemoteAgent):
        await model.end()
