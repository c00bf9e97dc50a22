"""Where the embedded model's step list goes: never a role a chat template may refuse."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("llama_cpp")

from retinue.llm._local_engine import _with_steps  # (needs llama_cpp)

READ: dict[str, Any] = {"name": "Read", "description": "Read a text file.\nMore."}


def test_the_steps_join_the_system_prompt() -> None:
    messages = [{"role": "system", "content": "You help."}, {"role": "user", "content": "hi"}]
    out = _with_steps(messages, {"Read": READ})
    assert [m["role"] for m in out] == ["system", "user"]
    assert out[0]["content"].startswith("You help.\n\nStart every reply with one word")
    assert "- Read: Read a text file." in out[0]["content"]
    assert out[1] == messages[1] and messages[0]["content"] == "You help."  # not changed


def test_without_a_system_prompt_the_steps_open_the_first_user_message() -> None:
    out = _with_steps([{"role": "user", "content": "hi"}], {"Read": READ})
    assert [m["role"] for m in out] == ["user"]
    assert out[0]["content"].startswith("Start every reply") and out[0]["content"].endswith("hi")
