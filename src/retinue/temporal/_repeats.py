"""The loop detectors on Temporal: the in-process run loop's, for the conversation workflow.

A turn's steps are watched by :class:`~retinue.engine.repeats.Repeats`, as
:func:`~retinue.engine.loop.run_turn` watches them: the same calls with the same results
``Limits.repeat_limit`` times in a row (the client's setting, as in-process the run's
``RunConfig.repeat_limit``: 3 by default, None for no detector), or not in a row twice as
often in the turn, get a note on their last result, and that step once more ends the turn
with ``stop_reason`` ``"repeated_call"`` instead of running it (each call answered "not
run"). ``SubAgent`` calls
that hand the same task to the same role again and again are counted by the sub-agent
manager's own rule (:func:`~retinue.subagents.caps.repeated_delegation`): the parent reads a
note instead of a new run, and its turn ends if it delegates that task once more. Both count
one turn of one agent (in-process, the delegations count over the main agent's turn).
Deterministic, as workflow code must be; a workflow run recorded before the detectors
existed replays without them (``workflow.patched``).
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from retinue.engine.repeats import Repeats, refusal
    from retinue.messages import AssistantMessage, ToolCall, ToolResultMessage, from_dict, to_dict
    from retinue.subagents.caps import delegations_detector, repeated_delegation
    from retinue.temporal._calls import Delegation
    from retinue.temporal._types import ConversationStart, Json

__all__ = ["PATCH", "Repeating"]

PATCH = "retinue-loop-detector"  # the workflow.patched id: runs recorded before it lack it
STOPS = "Not run: the same task was delegated again; your turn stops."


class Repeating:
    """The conversation workflow's loop detectors (a mixin: see the module docstring)."""

    _start: ConversationStart
    _messages: list[Json]
    _steps_seen: Repeats | None = None
    _delegations_seen: Repeats | None = None
    _stop_note: str | None = None  # a repeated delegation ends the turn after its step
    _detecting: bool | None = None

    def _start_counting(self) -> None:
        """A new turn: nothing seen yet."""
        limit = self._start.limits.repeat_limit
        self._steps_seen = Repeats(limit)
        self._delegations_seen = None if limit is None else delegations_detector(limit)
        self._stop_note = None

    def _detects(self) -> bool:
        if self._detecting is None:
            self._detecting = workflow.patched(PATCH)
        return self._detecting

    def _refused_step(self, calls: Sequence[ToolCall]) -> str | None:
        """The turn's final note when ``calls`` repeat a step the model was told about: each
        call is answered "not run" and the note closes the history (None: they run)."""
        seen, step = self._steps_seen, tuple(calls)
        if seen is None or not seen.refused(step) or not self._detects():
            return None
        self._messages.extend(to_dict(refusal(c)) for c in step)
        note = seen.stop_note(step)
        self._messages.append(to_dict(AssistantMessage(note)))
        return note

    def _observed_step(self, calls: Sequence[ToolCall], start: int) -> None:
        """Count the step ``calls`` made, whose results are ``_messages[start:]``; a result
        the detector adds a note to is rewritten (the others stay as they are). A step
        whose results are not all there yet (a question waits for its answer) is not
        counted. A result kept by reference (:mod:`retinue.temporal.refs`) is compared by
        its stub, the same for the same content."""
        seen = self._steps_seen
        if seen is None or not self._detects():
            return
        results = [from_dict(m) for m in self._messages[start:]]
        if len(results) != len(calls) or not all(isinstance(r, ToolResultMessage) for r in results):
            return
        told = [r for r in results if isinstance(r, ToolResultMessage)]
        noted = seen.observe(tuple(calls), told)
        for i, (before, after) in enumerate(zip(told, noted, strict=True)):
            if after is not before:  # (its content only: a stub keeps its reference)
                self._messages[start + i] = {**self._messages[start + i], "content": after.content}

    def _repeated_delegation(self, ask: Delegation) -> str | None:
        """What the parent reads instead of delegating ``ask`` once more (None: it runs)."""
        seen, limit = self._delegations_seen, self._start.limits.repeat_limit
        if seen is None or limit is None or not self._detects():
            return None
        found = repeated_delegation(seen, limit, ask.role, ask.instance, ask.task, ask.interactive)
        if found is None:
            return None
        note, stops = found
        if not stops:
            return note
        self._stop_note = note
        return STOPS
