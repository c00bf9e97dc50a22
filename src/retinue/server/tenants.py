"""Tenants of one service: what each token sees.

Every request's token names a tenant (see :mod:`retinue.server.tokens`): the service's own
token is the service's own tenant (``retinue serve --tenant``), and a named token is the
tenant it was issued for. A tenant has a :class:`TenantSpace`: its own conversations (a
:class:`~retinue.server.conversations.ConversationHost` whose store rows and leases carry the
tenant), its sub-agents' memory (the tenant's runtime view: the same model, roles, tools and
manager, with the tenant in its settings, so every tool context carries it), and its
sessions.

All tenants share the process's session manager, so another tenant's agent ids carry a
prefix ``@<tenant>/`` (``@bo/conv-abc/researcher``); the service's own tenant has none (its
ids are as they always were). The prefix is internal: a space shows its own ids without it
and reads the ids a client sends with it added, so every client sees ``conv-abc/...`` and
no id a client can send reaches another tenant's agent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.exceptions import HTTPException

from retinue.runtime import Runtime
from retinue.server.conversations import ConversationHost, Limits, TurnBudget
from retinue.server.hub import EventHub
from retinue.server.tokens import Principal
from retinue.subagents.registry import SessionInfo

__all__ = ["Space", "Spaces", "TenantSpace", "space_of"]

_MARK = "@"  # no conversation id, role or instance name starts with it


@dataclass(slots=True, eq=False)
class TenantSpace:
    """One tenant's view of the service: its host, its runtime, its agent ids."""

    tenant: str
    prefix: str  # "" for the service's own tenant, else "@<tenant>/"
    runtime: Runtime
    host: ConversationHost

    def owns(self, agent_id: str) -> bool:
        """Whether ``agent_id`` (internal) is one of this tenant's agents."""
        if self.prefix:
            return agent_id.startswith(self.prefix)
        return not agent_id.startswith(_MARK)

    def outside(self, agent_id: str) -> str:
        """An internal id of this tenant as its clients see it."""
        return agent_id[len(self.prefix) :] if self.prefix else agent_id

    def inside(self, external: str) -> str | None:
        """The internal id of an id a client sent, or None if it can name nothing here."""
        if external.startswith(_MARK):
            return None
        return self.prefix + external

    def shown(self, data: Any) -> Any:
        """JSON (an event, a session, a history) with this tenant's ids as its clients see
        them: the prefix taken out wherever it appears, in text too (a tool result that
        names a session)."""
        if not self.prefix:
            return data
        return _without(data, self.prefix)

    def held(self, external: str) -> SessionInfo | None:
        """The live session a client names, if it is this tenant's."""
        sid = self.inside(external)
        return self.runtime.manager.session(sid) if sid is not None else None

    def sessions(self, parent: str | None = None) -> list[SessionInfo]:
        """This tenant's live sessions (those ``parent`` holds, if given), oldest first."""
        registry = self.runtime.manager.registry
        if parent is not None:
            inner = self.inside(parent)
            return [h.info() for h in registry.held_by(inner)] if inner is not None else []
        return [h.info() for h in registry.held_by() if self.owns(h.id)]


def _without(data: Any, prefix: str) -> Any:
    if isinstance(data, str):
        return data.replace(prefix, "") if prefix in data else data
    if isinstance(data, dict):
        return {k: _without(v, prefix) for k, v in data.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(data, list | tuple):
        return [_without(v, prefix) for v in data]  # pyright: ignore[reportUnknownVariableType]
    return data


class Spaces:
    """The tenant spaces of one service, made on a tenant's first request."""

    def __init__(self, runtime: Runtime, hub: EventHub, limits: Limits | None = None) -> None:
        self.runtime = runtime
        self.hub = hub
        self.limits = limits or Limits()
        self.budget = TurnBudget()  # max_turns holds across tenants
        own = runtime.settings.tenant
        self.own = TenantSpace(own, "", runtime, self._host(runtime, ""))
        self._spaces: dict[str, TenantSpace] = {own: self.own}

    def _host(self, runtime: Runtime, prefix: str) -> ConversationHost:
        return ConversationHost(runtime, self.hub, self.limits, prefix=prefix, budget=self.budget)

    def of(self, principal: Principal) -> TenantSpace:
        """The space of ``principal``'s tenant."""
        tenant = principal.tenant or self.own.tenant
        space = self._spaces.get(tenant)
        if space is None:
            runtime = replace(self.runtime, settings=replace(self.runtime.settings, tenant=tenant))
            prefix = f"{_MARK}{tenant}/"
            space = TenantSpace(tenant, prefix, runtime, self._host(runtime, prefix))
            self._spaces[tenant] = space
        return space

    def __iter__(self) -> Iterator[TenantSpace]:
        return iter(list(self._spaces.values()))

    def others(self) -> list[ConversationHost]:
        """The hosts of the tenants other than the service's own."""
        return [s.host for s in self if s is not self.own]


def space_of(request: Request) -> TenantSpace:
    """The tenant space of the request's token (the Guard put its principal in the scope;
    the app keeps its :class:`Spaces` in ``app.state.spaces``)."""
    principal = getattr(request.state, "principal", None)
    if principal is None:
        raise HTTPException(401, "missing or wrong bearer token")
    spaces: Spaces = request.app.state.spaces
    return spaces.of(principal)


Space = Annotated[TenantSpace, Depends(space_of)]
"""A route's parameter: the caller's tenant space."""
