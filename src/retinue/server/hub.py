"""A fan-out event sink: the runtime has one sink; each SSE stream wants its own agent tree.

:class:`EventHub` is installed as the runtime's sink. It forwards every event to the sink
that was there before (a log printer, say) and to each subscriber whose agent id is the
event's agent id or an ancestor of it (``conv-a`` receives ``conv-a`` and ``conv-a/researcher``
but not ``conv-ab``). Events are emitted on the event loop's thread, so delivery is a plain
call; a subscriber must be quick and must not raise.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from retinue.events import Event, EventSink

__all__ = ["EventHub", "in_tree"]


def in_tree(agent_id: str, root: str) -> bool:
    """Whether ``agent_id`` is ``root`` or one of its descendants (``root/...``)."""
    return agent_id == root or agent_id.startswith(root + "/")


class EventHub:
    """Routes each event to the subscribers of the agent tree it comes from."""

    def __init__(self, downstream: EventSink | None = None) -> None:
        self.downstream = downstream
        self._subscribers: list[tuple[str, EventSink]] = []

    def __call__(self, event: Event) -> None:
        if self.downstream is not None:
            self.downstream(event)
        for root, sink in list(self._subscribers):
            if in_tree(event.agent_id, root):
                sink(event)

    @contextmanager
    def subscribe(self, root: str, sink: EventSink) -> Iterator[None]:
        """Deliver the events of ``root``'s tree to ``sink`` while the block runs."""
        entry = (root, sink)
        self._subscribers.append(entry)
        try:
            yield
        finally:
            self._subscribers.remove(entry)
