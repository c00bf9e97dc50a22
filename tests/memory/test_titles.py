"""A conversation's title: its first user message, also when a client seeded it with a
transcript of a chat begun elsewhere (the OpenAI-compatible endpoint does)."""

from __future__ import annotations

import pytest

from retinue.messages import AssistantMessage, SystemMessage, UserMessage
from retinue.store.conversations import TITLE_CHARS, title_of

SEEDED = (
    "[Earlier in this conversation, as the client sent it:]\n"
    "[instructions] You are a terse assistant.\n"
    "[user] What is the capital of France?\n"
    "[assistant] Paris.\n"
    "\n"
    "[The new message:]\n"
    "And of Italy?"
)


@pytest.mark.parametrize(
    ("first", "title"),
    [
        ("Say hello <b>bold</b>", "Say hello <b>bold</b>"),
        ("  two\n  lines ", "two lines"),
        ("[draft] the user's own", "[draft] the user's own"),
        (SEEDED, "What is the capital of France?"),
        (
            "[Earlier in this conversation, as the client sent it:]\n"
            "[instructions] Answer in French.\n\n[The new message:]\nHello there",
            "Hello there",
        ),
        ("[note]", "[note]"),
    ],
)
def test_the_title_is_what_the_user_said_first(first: str, title: str) -> None:
    messages = [SystemMessage("You help."), UserMessage(first), AssistantMessage("ok")]
    assert title_of(messages) == title


def test_a_long_title_is_cut() -> None:
    title = title_of([UserMessage(SEEDED.replace("France?", "France? " + "x" * 200))])
    assert len(title) == TITLE_CHARS and title.endswith("…")
    assert title.startswith("What is the capital of France? xxx")
