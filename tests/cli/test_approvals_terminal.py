"""Approvals in ``retinue chat`` in a real terminal (tmux): the request, the prompt, and the
answer: yes runs the call, no is a refusal the model reads, the chat goes on; a call three
sub-agents down is asked the same way."""

from __future__ import annotations

import shutil
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_terminal import Pane, pane_for  # noqa: F401 -- the fixture, shared

from retinue.llm.base import ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import Message
from retinue.testing import ScriptedModel, call_tool

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]


def test_chat_asks_before_a_write_and_takes_yes_and_no(
    tmp_path: Path,
    pane_for: Callable[..., Pane],  # noqa: F811 -- the fixture imported above
) -> None:
    model = ScriptedModel(
        [
            call_tool("Write", {"file_path": "yes.txt", "content": "approved"}),
            "Wrote yes.txt.",
            call_tool("Write", {"file_path": "no.txt", "content": "refused"}),
            "It was refused.",
        ]
    )
    with LoopbackOpenAIServer(model) as server:
        pane = pane_for(server)
        pane.wait_for(lambda t: "›" in t)
        pane.keys("write yes.txt", "Enter")
        screen = pane.wait_for(lambda t: "allow?" in t)
        assert "the main agent wants to run Write" in screen and "yes.txt" in screen
        assert "Write needs approval in permission mode 'default'" in screen
        assert not (tmp_path / "yes.txt").exists()
        pane.keys("y", "Enter")
        pane.wait_for(lambda t: "Wrote yes.txt." in t)
        assert (tmp_path / "yes.txt").read_text() == "approved"

        pane.keys("write no.txt", "Enter")
        pane.wait_for(lambda t: t.count("allow?") >= 2)
        pane.keys("n not this one", "Enter")
        pane.wait_for(lambda t: "It was refused." in t)
        assert not (tmp_path / "no.txt").exists()
        refusal = model.calls[-1].messages[-1].content
        assert "did not approve this call: not this one" in refusal
        pane.keys("C-d")
        pane.wait_for(lambda t: "EXITED 0" in t)


ROLE = """---
name: {name}
description: Level {name} of a chain.
capabilities: [spawn_agent]
---
You are {name}.
"""


def test_a_call_three_levels_down_is_asked_on_the_terminal(
    tmp_path: Path,
    pane_for: Callable[..., Pane],  # noqa: F811 -- the fixture imported above
) -> None:
    for name in ("lvl-a", "lvl-b", "lvl-c"):
        (tmp_path / ".retinue" / "agents" / f"{name}.md").write_text(ROLE.format(name=name))
    # one model serves every agent of the chain, in the order they speak; each sub-agent's
    # memory consolidation (a call offering the memorize tool) remembers nothing
    plan = deque(
        [
            call_tool("SubAgent", {"task": "go", "role": "lvl-a"}),
            call_tool("SubAgent", {"task": "go", "role": "lvl-b"}),
            call_tool("SubAgent", {"task": "go", "role": "lvl-c"}),
            call_tool("Write", {"file_path": "deep.txt", "content": "from c"}),
            "c wrote it",
            "b done",
            "a done",
            "All three levels finished.",
        ]
    )

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        if any(t.name == "memorize" for t in tools):
            return call_tool("memorize", {"block_updates": [], "new_passages": []})
        return plan.popleft()

    model = ScriptedModel(responder=respond)
    with LoopbackOpenAIServer(model) as server:
        pane = pane_for(server)
        pane.wait_for(lambda t: "›" in t)
        pane.keys("delegate it", "Enter")
        screen = pane.wait_for(lambda t: "allow?" in t)
        assert "sub-agent main/lvl-a#" in screen and "/lvl-c#" in screen
        assert "wants to run Write" in screen and not (tmp_path / "deep.txt").exists()
        pane.keys("y", "Enter")
        pane.wait_for(lambda t: "All three levels finished." in t)
        assert (tmp_path / "deep.txt").read_text() == "from c" and not plan
        pane.keys("C-d")
        pane.wait_for(lambda t: "EXITED 0" in t)
