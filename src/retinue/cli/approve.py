"""Approvals on the terminal: the request, then yes / no / always, one question at a time.

Used by ``retinue chat`` and by ``retinue run`` when its standard input is a terminal. What
was typed ahead while the turn ran is discarded before asking, so a line meant for the next
message can never approve a call. The answer is read on the event loop (a reader on standard
input, not a thread), so Ctrl-C or an interrupted turn withdraws the question at once and
leaves nothing reading the terminal afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable
from typing import TextIO

from rich.console import Console

from retinue.cli.term import escape, local_modes
from retinue.policy.approvals import Approval, ApprovalRequest

__all__ = ["TerminalApprover", "parse_answer"]

MAX_ANSWER = 4096

PROMPT = "[bold]allow?[/] [dim]\\[y]es / \\[n]o / \\[a]lways ({rule})[/] "


def parse_answer(text: str) -> Approval | None:
    """``y`` / ``yes``, ``n`` / ``no`` (anything after it is told to the model), ``a`` /
    ``always``; None for anything else (ask again)."""
    word, _, rest = text.strip().partition(" ")
    word = word.lower()
    if word in ("y", "yes"):
        return Approval(True)
    if word in ("a", "always"):
        return Approval(True, always=True)
    if word in ("n", "no"):
        return Approval(False, message=rest.strip())
    return None


class TerminalApprover:
    """An approver that asks on this process's terminal (see the module text).

    ``before`` runs before each question (the chat stops its spinner and ends a streamed
    line there).
    """

    def __init__(
        self,
        err: Console,
        *,
        before: Callable[[], None] | None = None,
        stdin: TextIO | None = None,
    ) -> None:
        self.err = err
        self.before = before
        self.stdin = stdin or sys.stdin
        self._lock = asyncio.Lock()

    async def __call__(self, request: ApprovalRequest) -> Approval:
        async with self._lock:  # parallel sub-agents: one question on the screen at a time
            if self.before is not None:
                self.before()
            self.err.print(f"[yellow]?[/] {_shown(request.describe())}", highlight=False)
            while True:
                rule = _shown(request.rule) if request.rule else "this call only"
                self.err.print(PROMPT.format(rule=rule), end="", highlight=False)
                line = await self._line()
                if line is None:  # end of input: nobody answers
                    return Approval(False, message="no answer (end of input)")
                answer = parse_answer(line)
                if answer is not None:
                    return answer

    async def _line(self) -> str | None:
        fd = self.stdin.fileno()
        loop = asyncio.get_running_loop()
        got: asyncio.Future[bytes] = loop.create_future()

        def readable() -> None:
            if not got.done():
                try:
                    got.set_result(os.read(fd, MAX_ANSWER))
                except OSError as exc:
                    got.set_exception(exc)

        with _echo(fd):
            _discard_typed_ahead(fd)
            loop.add_reader(fd, readable)
            try:
                data = await got
            finally:
                loop.remove_reader(fd)
        return data.decode("utf-8", errors="replace") if data else None


def _shown(text: str) -> str:
    """Model-made text made safe to print: no markup, and nothing a terminal acts on (an
    escape sequence could rewrite what the person reads before answering); one line."""
    return escape(text).replace("\n", "␊")


def _discard_typed_ahead(fd: int) -> None:
    with contextlib.suppress(Exception):
        import termios

        if os.isatty(fd):
            termios.tcflush(fd, termios.TCIFLUSH)


def _echo(fd: int) -> contextlib.AbstractContextManager[None]:
    """Echo on (a turn runs with it off) and canonical input, for the answer's line."""
    return local_modes(fd, on=("ECHO", "ICANON"))
