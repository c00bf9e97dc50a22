"""Approvals in ``retinue chat`` in a real terminal (tmux): the request, the prompt, and the
answer: yes runs the call, no is a refusal the model reads, the chat goes on."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from test_terminal import Pane, pane_for  # noqa: F401 -- the fixture, shared

from retinue.llm.loopback import LoopbackOpenAIServer
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
