"""``retinue serve --temporal ADDRESS``: a stateless HTTP front end over conversations that
run as Temporal workflows (:mod:`retinue.temporal`).

It holds no conversation: each request starts, updates or queries the conversation's
workflow through :class:`~retinue.temporal.client.TemporalConversations`, and the workers
(``retinue worker --temporal``) run the turns, so any number of front ends behind a load
balancer serve the same conversations. The routes are the service's (same token, tenants,
Host and Origin checks, bodies and errors: :mod:`retinue.server.app`): the conversation
routes (a reply with ``stop_reason`` ``"asking"`` is the main agent's question, which the
next message answers), a conversation's approvals (pending anywhere in its session tree,
answered from any front end), the sessions routes, the web page and the OpenAI-compatible
``/v1/chat/completions`` (the main agent, ``model: "retinue"``; ``retinue/<role>``: one
one-shot run of a role, as in-process, in a new conversation whose workflow closes itself with
the run, consolidated, whether or not this front end lives: its ``run_role`` Update).
``keep_sessions`` is moot: sessions are child workflows that live across turns until
unloaded. Not here yet: images and PDFs, a person's answer to a sub-agent session's
question (409: its parent agent holds the question), the roles in ``/v1/models`` (the
workers know them: an unknown one is 404 before its run starts). A tenant's conversations
are its workflows on its own task queue: the configured queue for the service's own tenant,
``<queue>-<tenant>`` for a named token's.

**The workers' store.** Given the memory store the workers use (``blobs`` and
``transcripts`` of :class:`TemporalFront`), the front end shows content kept by reference
whole (a conversation's history, a session's: :func:`~retinue.temporal.refs.resolve_history`,
the caller's tenant's only), and serves the transcripts the workers keep when a session
closes (``/v1/transcripts``, its search, ``/v1/sessions/{id}/transcript``: the in-process
routes of :mod:`retinue.server.transcripts`, each tenant its own, the ids as the service
names them). Without it, a stub shows its note and the transcript routes are not served.

**Sessions.** ``GET /v1/sessions`` lists the sessions of the tenant's conversations (of one
with ``team`` or ``parent``), ``GET /v1/sessions/{id}`` shows one with its history, and
``POST /v1/sessions/{id}/interrupt`` cancels its running turn: ``conv-CID``'s (the
conversation's, with the turns its sessions run for it) or a sub-agent session's alone (its
child workflow's ``cancel_turn``: its own sessions' turns for it end too, and its parent's
turn goes on, reading that it was interrupted); ``POST /v1/sessions/{id}/steer`` gives its
running turn a message before its next model call (the workflow's ``steer`` Update; 409 when
no turn runs). A session id names a node of the tree that
the conversation's own workflow reports (``state`` query), never a workflow id: a request
reaches only the child workflows of its tenant's conversation. Each session's facts come
from its workflow's ``session_view`` query, its tokens and cost among them (the workflow
adds up each model call's usage; a cost is null when the model's price is unknown).

**Streaming.** Temporal does not stream. The workflow's state is the source of the events:
while a turn runs, the front end that started it asks the workflow every ``poll_s`` (0.2 s)
for the messages past those it has seen (the ``history_since`` query: what is new, not the
whole history) and turns what the workers added into events (``tool_started``,
``tool_finished``, a ``text_delta`` with each model step's whole text, and an
``approval_requested`` for each request that comes up), so a turn is
streamed step by step, not token by token, by whichever front end a client reached. A client
that goes away does not stop its turn (the workers finish it; its history keeps it).

**Retries.** A message sent with an ``Idempotency-Key`` header is the workflow's Update of
that id: a client that retries it through another front end (the first one died mid-turn)
gets the same turn's reply, and the turn runs once.

**Tracing.** While tracing is on, each message is a ``retinue.message`` span here (a child of
the request's ``traceparent``, if it came with one), the parent of its turn's spans in the
workflows and activities (:mod:`retinue.temporal.tracing`): one trace per message.
"""

from retinue.server.temporal_front.front import (
    MESSAGE_SPAN,
    TemporalFront,
    TemporalUnavailable,
    front_status,
)
from retinue.server.temporal_front.routes import create_temporal_app

__all__ = [
    "MESSAGE_SPAN",
    "TemporalFront",
    "TemporalUnavailable",
    "create_temporal_app",
    "front_status",
]
