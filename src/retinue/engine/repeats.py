"""Loop detection: a model that makes the same tool calls over and over is told, then stopped.

Small models in particular repeat themselves: the same ``Read`` of the same file fifty times,
or the same failing call. :class:`Repeats` watches the steps of one run (the tool calls of one
model reply and their results) and

* from the ``limit``-th step in a row with the *same calls* (names and argument text) and the
  *same results*, appends a note to that step's last result: the call will not tell it
  anything new, and making it once more ends the run;
* refuses the next step if it is that same step again (:meth:`Repeats.refused`): the run
  then stops with ``stop_reason`` ``"repeated_call"`` instead of running it, long before
  ``max_iterations``;
* from the ``limit``-th step in a row whose failing calls are the same (their errors may
  differ), appends to each error a hint to change the call (the run goes on);
* counts each step (calls and results) over the whole run too, so that a cycle is caught as
  well (``Grep``, ``Grep``, ``Bash``, then the same again: nothing in a row): from the
  :data:`TURN_REPEATS`-th time one step was made with the same results in the run, the model
  is told the same, and making that call again ends the run.

It costs a tuple comparison and a dictionary update per step, and holds the last step's calls
and results and a count per distinct step of the run.

A tool with a loop detector of its own (the sub-agent manager's, for the same task delegated
to the same role again and again) ends the run the same way with :func:`stop_turn`: the run
stops after the step that asked, with ``stop_reason`` ``"repeated_call"`` and the tool's note.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import replace

from retinue.messages import ToolCall, ToolResultMessage

__all__ = [
    "REPEAT_LIMIT",
    "TURN_REPEATS",
    "Repeats",
    "listen_for_stop",
    "refusal",
    "stop_turn",
    "stopped_note",
]

REPEAT_LIMIT = 3
"""Identical steps in a row after which the model is warned; one more ends the run."""
TURN_REPEATS = 2
"""How many times ``limit`` one step may be made in a run, with the same results each time and
not in a row, before the model is warned (at the default limit: the sixth time)."""

_NAME_CHARS = 64  # of a tool name quoted in a note (the model wrote it)

_SAME_RESULT = (
    "\n(You have now made this exact call {n} times in a row and got the same result each "
    "time; it will not tell you anything new. Do not make it again: making it once more "
    "stops the run. Use the result above, try something else, or answer.)"
)
_SAME_IN_TURN = (
    "\n(You have now made this exact call {n} times in this turn and got the same result each "
    "time; it will not tell you anything new. Do not make it again: making it once more "
    "stops the run. Use the result above, try something else, or answer.)"
)
_SAME_ERROR = (
    "\n(This exact call has now failed {n} times in a row with the same error. Do not make "
    "it again: making it once more stops the run. Change the arguments, use another tool, or "
    "answer with what you know.)"
)
_SAME_FAILURE = (
    "\n(This exact call has now failed {n} times in a row. Do not repeat it: change the "
    "arguments, use another tool, or answer with what you know.)"
)


def _names(calls: tuple[ToolCall, ...]) -> str:
    return ", ".join(dict.fromkeys(c.name[:_NAME_CHARS] for c in calls))


def stopped_note(calls: tuple[ToolCall, ...], times: int, *, in_a_row: bool = True) -> str:
    """The run's final content when it stops on a repeated call."""
    where = "in a row" if in_a_row else "in this turn"
    return (
        f"Stopped: the agent called {_names(calls)} with the same arguments {times} times "
        f"{where}, getting the same result each time, and went on after being told "
        "(stop_reason=repeated_call)."
    )


def refusal(call: ToolCall) -> ToolResultMessage:
    """The result of a repeated call that is not run: the run stops instead."""
    return ToolResultMessage(
        call.id, call.name, "Error: not run: the same call was repeated; the run stops.", True
    )


class Repeats:
    """The loop detector of one run (see the module docstring)."""

    __slots__ = (
        "_calls",
        "_counts",
        "_failed",
        "_failing",
        "_results",
        "_same",
        "_warned",
        "limit",
    )

    def __init__(self, limit: int | None = REPEAT_LIMIT) -> None:
        self.limit = limit  # None: count, never warn nor stop
        self._calls: tuple[tuple[str, str], ...] = ()
        self._results: tuple[tuple[str, bool], ...] = ()
        self._same = 0  # steps in a row with the same calls and the same results
        self._failing: tuple[tuple[str, str], ...] = ()
        self._failed = 0  # steps in a row with the same failing calls
        self._counts: dict[int, int] = {}  # each distinct step of the run (by hash): times made
        self._warned: dict[tuple[tuple[str, str], ...], int] = {}  # calls told, not in a row

    @property
    def times(self) -> int:
        """How many steps in a row were the same (calls and results) so far."""
        return self._same

    def refused(self, calls: tuple[ToolCall, ...]) -> bool:
        """Whether ``calls`` repeat a step the model was already warned about: the run stops
        rather than run them."""
        if self.limit is None:
            return False
        key = _key(calls)
        return (self._same >= self.limit and key == self._calls) or key in self._warned

    def stop_note(self, calls: tuple[ToolCall, ...]) -> str:
        """The run's final content when :meth:`refused` stops it on ``calls``."""
        key = _key(calls)
        if self._same >= (self.limit or 0) and key == self._calls:
            return stopped_note(calls, self._same + 1)
        return stopped_note(calls, self._warned.get(key, 0) + 1, in_a_row=False)

    def observe(
        self, calls: tuple[ToolCall, ...], results: list[ToolResultMessage]
    ) -> list[ToolResultMessage]:
        """Count the step ``calls`` made with ``results``; the results, with a note where it
        repeats."""
        key = _key(calls)
        outcome = tuple((r.content, r.is_error) for r in results)
        same = key == self._calls and outcome == self._results
        self._same = self._same + 1 if same else 1
        self._calls, self._results = key, outcome
        failing = tuple(
            (c.name, c.arguments) for c, r in zip(calls, results, strict=True) if r.is_error
        )
        repeat = bool(failing) and failing == self._failing
        self._failed = self._failed + 1 if repeat else int(bool(failing))
        self._failing = failing
        if self.limit is None:
            return results
        step = hash((key, outcome))
        made = self._counts[step] = self._counts.get(step, 0) + 1
        if self._same < self.limit and made >= self.limit * TURN_REPEATS:
            self._warned[key] = made  # (a cycle: the same step, but not in a row)
            last = results[-1]
            note = _SAME_IN_TURN.format(n=made)
            return [*results[:-1], replace(last, content=last.content + note)]
        if self._same >= self.limit:
            last = results[-1]
            failed = all(r.is_error for r in results)
            note = (_SAME_ERROR if failed else _SAME_RESULT).format(n=self._same)
            return [*results[:-1], replace(last, content=last.content + note)]
        if self._failed >= self.limit:
            hint = _SAME_FAILURE.format(n=self._failed)
            return [replace(r, content=r.content + hint) if r.is_error else r for r in results]
        return results


_STOPS: ContextVar[list[str] | None] = ContextVar("retinue_turn_stops", default=None)


def stop_turn(note: str) -> bool:
    """From a tool: end the run that called it after the running step, with ``note`` (a
    "Stopped: …" sentence the user reads) as its final content and ``stop_reason``
    ``"repeated_call"``. False when no run listens (the tool was called outside a run)."""
    asked = _STOPS.get()
    if asked is None:
        return False
    asked.append(note)
    return True


def listen_for_stop(asked: list[str]) -> Token[list[str] | None]:
    """For the run loop: what :func:`stop_turn` asks from now on goes to ``asked`` (the
    tools' tasks copy the context, not the list); reset the token when the run ends."""
    return _STOPS.set(asked)


def _key(calls: tuple[ToolCall, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((c.name, c.arguments) for c in calls)
