"""How many Python frames one ``retinue chat`` turn with one tool call goes through (issue 42).

The chat's own loop (``ChatRepl.loop``) reads one line ("count it") from a stand-in reader and
runs its turn; the scripted model answers with one tool call, then with text. At the model's
first call and at the tool's run it looks at where it stands, two ways, both counted from the
chat's ``_turn`` (the method that takes the line the user typed) down:

* ``stack``: the frames on the thread's stack at that point (``sys._getframe`` walked up to
  ``ChatRepl._turn``; asyncio's own frames of ``runner.run`` included), plus the coroutine
  frames suspended in the task the chat awaits (``Conversation.send`` and what it awaits, in
  the task that ``runner.run`` made), which the answer travels back through;
* ``retinue``: the same frames that belong to the ``retinue`` package alone.

The figures are the same whichever machine runs it (no timing). Run it from a checkout:
``uv run python benchmarks/turn_frames.py`` (prints one JSON line; ``--where`` names each
frame).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import retinue
from retinue.cli.chat import ChatRepl
from retinue.config import Settings
from retinue.llm.base import ToolSpec
from retinue.messages import AssistantMessage, Message, ToolCall
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel
from retinue.tools import ToolContext, tool

PACKAGE = str(Path(retinue.__file__).parent)
seen: dict[str, list[str]] = {}


def _where(frame: types.FrameType) -> str:
    return f"{frame.f_code.co_filename.rsplit('/', 2)[-1]}:{frame.f_code.co_qualname}"


def _suspended(coro: Any) -> list[types.FrameType]:
    """The frames of a coroutine chain (a task's), outermost first, while it awaits."""
    frames = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


def capture(label: str) -> None:
    """Record the frames from the chat's ``_turn`` to here (see the module docstring)."""
    stack: list[types.FrameType] = []
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        stack.append(frame)
        if frame.f_code.co_name == "_turn" and "cli" in frame.f_code.co_filename:
            break
        frame = frame.f_back
    here = asyncio.current_task()
    waiting: list[types.FrameType] = []
    for task in asyncio.all_tasks():
        chain = _suspended(task.get_coro())
        sends = any(f.f_code.co_name in ("send", "_send") for f in chain)
        if task is not here and sends and len(chain) > len(waiting):
            waiting = chain  # the chat's own task: Conversation.send and below
    frames = [*reversed(stack), *waiting]
    seen[label] = [_where(f) for f in frames]
    seen[label + ":retinue"] = [
        _where(f) for f in frames if f.f_code.co_filename.startswith(PACKAGE)
    ]


@tool("Count")
async def count(ctx: ToolContext) -> str:
    """Count something."""
    capture("tool")
    return "3"


def reply_call(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
    capture("model")
    return AssistantMessage("", (ToolCall("c1", "Count", "{}"),))


class Lines:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def read(self) -> str | None:
        return self.lines.pop(0) if self.lines else None


def main() -> None:
    parser = argparse.ArgumentParser(description="Frames of one chat turn with a tool call")
    parser.add_argument("--where", action="store_true", help="name every frame counted")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp) / "home", workspace=Path(tmp))
        model = ScriptedModel([reply_call, "There are 3."])
        runtime = Runtime.create(settings, model=model, extra_tools=[count], with_memory=False,
                                 builtins=False)  # fmt: skip
        repl = ChatRepl(runtime)
        repl.reader = Lines(["count it"])  # type: ignore[assignment]
        repl.loop()
    result: dict[str, Any] = {
        "model_stack": len(seen["model"]),
        "model_retinue": len(seen["model:retinue"]),
        "tool_stack": len(seen["tool"]),
        "tool_retinue": len(seen["tool:retinue"]),
    }
    if args.where:
        result["where"] = seen
    print(json.dumps(result))


if __name__ == "__main__":
    main()
