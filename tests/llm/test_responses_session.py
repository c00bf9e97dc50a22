"""A long session on an emulated gpt-5.6-terra over the Responses API: it is compressed several
times, and no request is ever refused by the emulated rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessionkit import long_session, respond

from retinue.engine.compress import SUMMARY_PREFIX, is_summary
from retinue.llm.loopback_responses import LoopbackResponsesServer
from retinue.llm.openai_responses import OpenAIResponsesModel
from retinue.testing import ScriptedModel


def _summarised_with_reasoning(body: dict[str, Any]) -> bool:
    """A request after a compression whose turn in progress replays its reasoning item."""
    items = body["input"]
    summarised = any(
        i.get("role") == "user" and str(i.get("content", "")).startswith(SUMMARY_PREFIX)
        for i in items
    )
    return summarised and any(i.get("type") == "reasoning" for i in items)


async def test_a_long_session_compresses_and_is_never_refused(tmp_path: Path) -> None:
    with LoopbackResponsesServer(ScriptedModel([respond] * 40)) as server:
        model = OpenAIResponsesModel("gpt-5.6-terra", base_url=server.base_url, max_retries=0)
        messages = await long_session(model, tmp_path)
    assert server.rejected == []
    assert any(is_summary(m) for m in messages)
    assert any(_summarised_with_reasoning(b) for b in server.requests)
