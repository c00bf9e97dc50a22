"""The values that cross Temporal's boundary: workflow input, activity steps, replies,
signals between the workflows of one session tree, and what the queries answer.

Plain dataclasses of JSON data (Temporal's default converter), kept apart from the workflow
and the activities so that both import them and the workflow's sandbox imports nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CONSOLIDATE_ACTIVITY",
    "KEEP_ACTIVITY",
    "MODEL_ACTIVITY",
    "NOT_ON_TEMPORAL",
    "OPEN_ACTIVITY",
    "TOOL_ACTIVITY",
    "WORKFLOW_NAME",
    "WORKFLOW_TOOLS",
    "Admission",
    "Admitted",
    "Agent",
    "ApprovalAnswer",
    "ChildRef",
    "Closed",
    "ConsolidateStep",
    "ConversationStart",
    "ConversationState",
    "Delivery",
    "FanOutCounts",
    "HistoryPage",
    "Limits",
    "ModelReply",
    "ModelStep",
    "OpenReply",
    "OpenStep",
    "Outline",
    "PendingApproval",
    "Question",
    "Reply",
    "SessionNode",
    "Spent",
    "ToolOutcome",
    "ToolStep",
    "TurnReply",
]

WORKFLOW_NAME = "RetinueConversation"
MODEL_ACTIVITY = "retinue.model_call"
TOOL_ACTIVITY = "retinue.tool_call"
OPEN_ACTIVITY = "retinue.open_session"
CONSOLIDATE_ACTIVITY = "retinue.consolidate"
KEEP_ACTIVITY = "retinue.keep_transcript"  # a close without consolidation: the main agent's

# the calls a workflow answers itself (child workflows, a question to the parent, a
# session's state)
WORKFLOW_TOOLS = frozenset({"SubAgent", "UnloadSubAgent", "AskParent", "SubAgentStatus"})
# tools of the in-process session tree that a workflow does not offer (yet)
NOT_ON_TEMPORAL = frozenset({"SendMessage", "TeamCreate", "TeamDelete"})

Json = dict[str, Any]


@dataclass(slots=True)
class Spent:
    """What model calls used: one call's (a model activity's), a turn's or a session's
    (the workflow adds them up), as :class:`retinue.messages.Usage` counts it, with its cost
    in US dollars (None: a call's model has no known price, so the sum is unknown)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    requests: int = 0
    cost_usd: float | None = 0.0

    def plus(self, other: Spent) -> Spent:
        cost = (
            None
            if self.cost_usd is None or other.cost_usd is None
            else self.cost_usd + other.cost_usd
        )
        return Spent(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.requests + other.requests,
            cost,
        )


@dataclass(slots=True)
class Limits:
    """What a conversation workflow is held to. Temporal allows about 51,200 events and
    50 MB of history per run and 2 MB per payload; a run continues as new past
    ``max_events`` or ``max_history_bytes`` (or when the server suggests it)."""

    max_iterations: int = 50  # model calls in one turn
    max_events: int = 10_000
    max_history_bytes: int = 20_000_000
    # a turn stops (the conversation goes on) before its run's history passes these: the
    # server terminates a run at 50 MB or 51,200 events, and one turn's model calls each
    # add the whole history (up to max_payload_bytes) to it
    max_run_history_bytes: int = 40_000_000
    max_run_events: int = 40_000
    max_message_chars: int = 1_000_000  # a user message (one payload holds 2 MB)
    # one model call's new messages (those since the history its last call stored), and
    # one step's tool results together, are held under this (Temporal: 2 MB per payload)
    max_payload_bytes: int = 1_800_000
    # a message (a tool result) larger than this (its JSON) goes to the store, and the
    # workflow's history holds a reference and its head (retinue.temporal.refs); 0: none
    inline_bytes: int = 64_000
    model_timeout_s: float = 600.0  # one model call, every attempt
    # one tool call, each try (but those of tool_timeouts, or a tool's own Tool.timeout_s)
    tool_timeout_s: float = 3600.0
    # one call of the tools named, each try: past it the call is stopped and the model told
    # (set it above a tool's own limit, e.g. Bash's 10 minutes at most)
    tool_timeouts: dict[str, float] = field(default_factory=dict[str, float])
    heartbeat_s: float = 30.0  # a worker that has not beaten for this long is dead
    model_attempts: int = 5  # tries of one model call (then the turn fails, history kept)
    # tries of one call of an idempotent tool (or its own Tool.attempts; others run once)
    tool_attempts: int = 3
    max_children: int = 100  # sessions one agent holds at once (Temporal: 2,000 children)
    max_calls: int = 100  # tool calls one model reply may make run (the rest are refused)
    # the loop detectors' limit (retinue.temporal._repeats): identical steps in a row, or one
    # task delegated to one role, before the model is told, and then stopped; None: off.
    # The run's RunConfig.repeat_limit in-process, and its default (engine.repeats' 3)
    repeat_limit: int | None = 3

    @property
    def max_message_bytes(self) -> int:
        """A message's size at most as the JSON Temporal carries it (a user message, a
        delegated task, a question): half a payload, as it travels with what it adds to."""
        return self.max_payload_bytes // 2


@dataclass(slots=True)
class Agent:
    """Who a workflow runs: the main agent (``chain`` empty) or a sub-agent session, whose
    ``chain`` is ``[agent id, role]`` of each session from depth 1 down to it."""

    agent_id: str
    role: str = "main"
    chain: list[list[str]] = field(default_factory=list)
    parent: str = ""  # the parent's workflow id ("" for the main agent)
    root: str = ""  # the conversation's workflow id ("" for the main agent: its own)
    one_shot: bool = False


@dataclass(slots=True)
class Question:
    """An ``AskParent`` call waiting for its answer (the next message)."""

    call_id: str
    text: str


@dataclass(slots=True)
class ChildRef:
    """A sub-agent session an agent holds, and how its model names it (``role[:instance]``;
    ``""``: a one-shot run, reached by nobody)."""

    agent_id: str
    role: str
    address: str
    workflow_id: str
    one_shot: bool = False
    # what its parent knows of it, for SubAgentStatus (its turns are the parent's messages)
    turns: int = 0  # messages it answered
    busy: bool = False  # a message of the parent's is being answered
    question: str = ""  # it asked this ("": it asks nothing)


@dataclass(slots=True)
class SessionNode:
    """One session of the tree as a front end shows it."""

    agent_id: str
    role: str
    parent_id: str
    workflow_id: str
    state: str  # "idle", "busy", "paused" (an approval), "asking", "closed"
    turns: int = 0


@dataclass(slots=True)
class FanOutCounts:
    """The sessions a conversation has started, counted by its workflow against the caps:
    in its main agent's running turn, in all, and those open now (by agent id)."""

    run: int = 0
    total: int = 0
    open: list[str] = field(default_factory=list[str])


@dataclass(slots=True)
class ConversationStart:
    """A conversation workflow's input (a sub-agent session's too, with ``agent``); a run
    that continues as new passes on its state."""

    tenant: str
    conversation_id: str
    messages: list[Json] = field(default_factory=list)  # retinue.messages.to_dict form
    step: int = 0  # steps taken so far (model calls and tool steps): the keys go on counting
    limits: Limits = field(default_factory=Limits)
    agent: Agent | None = None  # None: the main agent of conversation_id
    question: Question | None = None
    children: list[ChildRef] = field(default_factory=list)
    opened: int = 0  # sessions opened so far (one-shot numbers, workflow id suffixes)
    turns: int = 0
    sessions: list[SessionNode] = field(default_factory=list)  # the main agent's: the tree
    fanout: FanOutCounts = field(default_factory=FanOutCounts)  # the main agent's
    # the rules "always" answers added in the session tree (ToolOutcome.allowed's form)
    allowed: list[Json] = field(default_factory=list)
    opening: str = ""  # the start of the first user message, if ``messages`` lacks it
    steering: list[str] = field(default_factory=list)  # for the next turn's first model call
    spent: Spent = field(default_factory=Spent)  # by the session's model calls so far
    failed: bool = False  # its last turn failed (its note: "Stopped: " and the failure)


@dataclass(slots=True)
class ModelStep:
    key: str  # workflow id / step: the idempotency key
    tenant: str
    conversation_id: str
    messages: list[Json]
    last_input_tokens: int = 0  # the previous call's, for AutoCompress's estimate
    agent: Agent | None = None
    # > 0: store what is sent (its stub comes back) and keep larger messages by reference
    inline_bytes: int = 0


@dataclass(slots=True)
class ModelReply:
    message: Json
    input_tokens: int = 0
    output_tokens: int = 0
    # the history AutoCompress shortened, if it did (by reference: the stub alone, stored)
    history: list[Json] | None = None
    local: list[str] = field(default_factory=list)  # WORKFLOW_TOOLS this agent has
    # the tools the message calls that are idempotent (tried again when a try fails)
    idempotent: list[str] = field(default_factory=list)
    refused: bool = False  # a guard stopped the turn: ``message`` is its note, the answer
    # the stub of the history the call was sent (``history`` if given), as stored: the next
    # call sends it and the messages since (None: not stored, the next sends them all)
    stored: Json | None = None
    # what the tools the message calls declare of themselves (Tool.timeout_s, .attempts)
    timeouts: dict[str, float] = field(default_factory=dict[str, float])
    attempts: dict[str, int] = field(default_factory=dict[str, int])
    # the call's usage (None: a reply of a worker that did not say it, or no call was made)
    spent: Spent | None = None


@dataclass(slots=True)
class ToolStep:
    key: str  # workflow id / step / call id: the idempotency key
    tenant: str
    conversation_id: str
    call: Json  # {"id", "name", "arguments"}
    agent: Agent | None = None
    answered: Json | None = None  # the approval request a person answered, and the answer
    answer: ApprovalAnswer | None = None
    allowed: list[Json] = field(default_factory=list)  # "always" answers' rules, so far
    inline_bytes: int = 0  # a larger result goes by reference (0: inline, whatever its size)


@dataclass(slots=True)
class ToolOutcome:
    """The call's result, or the approval it waits for (it did not run)."""

    result: Json | None = None
    approval: Json | None = None  # retinue.policy.approvals.ApprovalRequest.to_dict()
    # the rules an "always" answer added while it ran ({"text", "tool", "spec", "pattern",
    # "flags"}: retinue.policy.rules.Rule, made from the call, never parsed from its text)
    allowed: list[Json] = field(default_factory=list)


@dataclass(slots=True)
class OpenStep:
    tenant: str
    conversation_id: str
    agent: Agent  # the session to open


@dataclass(slots=True)
class OpenReply:
    error: str = ""  # why it may not be opened ("": it may)
    initial_prompt: str = ""  # its role's, before its first message
    # the worker's sub-agent caps (retinue.subagents.caps.FanOutLimits; 0: none)
    per_run: int = 0
    per_conversation: int = 0
    concurrent: int = 0


@dataclass(slots=True)
class Admission:
    """A session asks its conversation's workflow whether it may open one (the caps are
    counted there); the answer comes back by the ``admitted`` signal."""

    token: str
    agent_id: str  # of the session to open
    role: str
    caps: OpenReply  # (its per_run, per_conversation, concurrent)
    reply_to: str  # the asking session's workflow id


@dataclass(slots=True)
class Admitted:
    token: str
    refused: str = ""  # why not ("": it may open)


@dataclass(slots=True)
class ConsolidateStep:
    """A closing session's history and what it used: its consolidation keeps its transcript
    and its memory; ``KEEP_ACTIVITY`` keeps the transcript alone (the main agent's, or a
    session's that closed before its first turn)."""

    tenant: str
    conversation_id: str
    agent: Agent
    messages: list[Json]
    run_id: str  # the session's first run id: one consolidation, however often it is tried
    spent: Spent = field(default_factory=Spent)  # by the session's model calls
    failed: bool = False  # its last turn failed


@dataclass(slots=True)
class Delivery:
    """A parent's message to a session; the reply goes back by the ``reply`` signal."""

    text: str
    reply_to: str  # the parent's workflow id
    token: str


@dataclass(slots=True)
class Reply:
    token: str
    content: str
    stop_reason: str  # a TurnReply's, or "failed"
    spent: Spent | None = None  # by the turn's model calls (None: a reply of before)


@dataclass(slots=True)
class Closed:
    """A session tells its parent it closed."""

    agent_id: str
    consolidation: str  # "done", "failed", "none"
    turns: int
    began: bool


@dataclass(slots=True)
class PendingApproval:
    request: Json  # ApprovalRequest.to_dict(): what the person is shown, no more
    workflow_id: str  # the session's that waits


@dataclass(slots=True)
class ApprovalAnswer:
    id: str  # the request's
    allow: bool
    message: str = ""  # tells the model why not
    always: bool = False  # allow, and add the request's rule for the session tree's life


@dataclass(slots=True)
class ConversationState:
    state: str  # "idle", "busy", "paused" (waits on a person: approval or question), "closed"
    approvals: list[Json]  # pending ApprovalRequest dicts, anywhere in the tree
    question: str | None  # the main agent's question to the user (the next message answers)
    sessions: list[SessionNode]


@dataclass(slots=True)
class HistoryPage:
    """The ``history_since`` query's answer: the history's length, and its messages from the
    index asked for on (none past the end), so a front end that polls a running turn gets
    only what is new."""

    total: int
    messages: list[Json] = field(default_factory=list)


@dataclass(slots=True)
class Outline:
    """The ``outline`` query's answer: what a list of conversations shows of one."""

    messages: int  # in its history
    opening: str  # the start of its first user message ("": none)


@dataclass(slots=True)
class TurnReply:
    content: str
    # "final", "max_iterations", "asking" (content is the question) or "interrupted" (the
    # turn was cancelled: cancel_turn)
    stop_reason: str
    step: int
    spent: Spent = field(default_factory=Spent)  # by the turn's model calls
