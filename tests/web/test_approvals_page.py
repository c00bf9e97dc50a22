"""Approvals on the web page (Debian's Chromium, a live server, models scripted): a ``Write``
three levels down (main → a → b → c) waits for a person; the page shows its card, live from
the turn's events and after a reload from the conversation, and answers it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from retinue.messages import Message
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(90)
serverkit = importlib.import_module("serverkit")  # on sys.path: conftest
chain = importlib.import_module("test_approvals")  # tests/server: the chain's runtime
page_kit = importlib.import_module("test_page")
pages = page_kit.pages  # the fixture: fresh pages that may not throw or break the CSP
signed_in, say, shot = page_kit.signed_in, page_kit.say, page_kit.shot


def relay(messages: Sequence[Message], _tools: Any) -> str:
    """A scripted step that says what its last tool call returned (a denial, say)."""
    return f"I read: {messages[-1].content}"


def relaying_chain() -> dict[str, ScriptedModel]:
    """main → a → b → c, c calls ``Write``; every level then says what it was told."""
    models = {n: ScriptedModel(name=f"scripted:{n}") for n in ("main", "a", "b", "c")}
    for name, below in (("main", "a"), ("a", "b"), ("b", "c")):
        models[name].add(call_tool("SubAgent", {"task": "go", "role": below}), relay)
    models["c"].add(call_tool("Write", {"file_path": "deep.txt", "content": "from c"}), relay)
    return models


def started(tmp_path: Path, models: dict[str, ScriptedModel]) -> Any:
    return serverkit.ServerThread(chain.chain_runtime(tmp_path, models)).start()


def card(page: Page) -> Any:
    return page.locator("#approvals .approval")


def test_allow_on_the_page_lets_a_write_three_levels_down_run(
    tmp_path: Path, pages: Callable[[], Page]
) -> None:
    server = started(tmp_path, chain.scripted("written"))
    try:
        page = signed_in(pages(), server)
        cid = say(page, "go")
        box = card(page)
        expect(box).to_have_count(1)
        expect(box.locator(".who")).to_have_text(
            re.compile(rf"^Sub-agent c \(conv-{cid}/a#\d+/b#\d+/c#\d+, depth 3\) wants to run")
        )
        expect(box).to_have_attribute("data-tool", "Write")
        expect(box).to_contain_text('"file_path": "deep.txt"')
        expect(box).to_contain_text("Write needs approval in permission mode 'default'")
        expect(box.locator(".approval-rule")).to_contain_text(
            "Always adds the rule Edit(./deep.txt)"
        )
        node = page.locator(f'li.node[data-id^="conv-{cid}/a#"][data-id*="/c#"]')
        expect(node).to_contain_text("waits for your approval")
        shot(page, "approval-pending.png")
        assert not (tmp_path / "deep.txt").exists()

        box.get_by_role("button", name="Allow").click()
        expect(box).to_have_count(0)
        expect(page.locator("#approvals")).to_be_hidden()
        expect(page.locator("#messages .msg-assistant .text").last).to_have_text("main done")
        assert (tmp_path / "deep.txt").read_text() == "from c"
        with server.client() as client:
            assert client.get(f"/v1/conversations/{cid}/approvals").json()["approvals"] == []
    finally:
        server.stop()


def test_deny_with_a_reason_reaches_the_model_and_the_turn_goes_on(
    tmp_path: Path, pages: Callable[[], Page]
) -> None:
    models = relaying_chain()
    server = started(tmp_path, models)
    try:
        page = signed_in(pages(), server)
        say(page, "go")
        box = card(page)
        expect(box).to_have_count(1)
        box.locator("input").fill("not <b>that</b> file")
        box.get_by_role("button", name="Deny").click()
        expect(box).to_have_count(0)
        final = page.locator("#messages .msg-assistant .text").last
        expect(final).to_contain_text("did not approve this call: not <b>that</b> file")
        expect(final.locator("b")).to_have_count(0)
        assert not (tmp_path / "deep.txt").exists()
        told = models["c"].calls[-1].messages[-1]
        assert "did not approve this call: not <b>that</b> file" in str(told.content)
    finally:
        server.stop()


def test_a_reloaded_tab_shows_the_pending_card_and_its_answer_reaches_every_tab(
    tmp_path: Path, pages: Callable[[], Page]
) -> None:
    server = started(tmp_path, chain.scripted("written"))
    try:
        sender = signed_in(pages(), server)
        cid = say(sender, "go")
        expect(card(sender)).to_have_count(1)
        other = signed_in(pages(), server)  # another tab: no events, only what the server says
        page_kit.conversation_item(other, cid).click()
        expect(card(other)).to_have_count(1)
        other.reload()
        expect(other.locator("#app")).to_be_visible()
        page_kit.conversation_item(other, cid).click()
        expect(card(other)).to_have_count(1)
        expect(card(other)).to_contain_text("deep.txt")
        assert not (tmp_path / "deep.txt").exists()

        card(other).get_by_role("button", name="Allow").click()
        expect(card(other)).to_have_count(0)
        expect(card(sender)).to_have_count(0)  # the sender's turn said it was answered
        expect(sender.locator("#messages .msg-assistant .text").last).to_have_text("main done")
        expect(other.locator("#messages .msg-assistant .text").last).to_have_text("main done")
        assert (tmp_path / "deep.txt").read_text() == "from c"
    finally:
        server.stop()


def test_stop_denies_the_pending_call_so_nothing_stays_stored(
    tmp_path: Path, pages: Callable[[], Page]
) -> None:
    server = serverkit.ServerThread(
        chain.chain_runtime(tmp_path, chain.main_writes(), with_memory=True)
    ).start()
    try:
        page = signed_in(pages(), server)
        cid = say(page, "go")
        expect(card(page)).to_have_count(1)
        page.click("#stop")
        expect(card(page)).to_have_count(0)
        expect(page.locator("#send")).to_be_enabled()
        with server.client() as client:
            serverkit.wait_for(
                lambda: not client.get("/v1/conversations").json()["conversations"][0]["running"]
            )
            assert client.get(f"/v1/conversations/{cid}/approvals").json()["approvals"] == []
        assert not (tmp_path / "main.txt").exists()
    finally:
        server.stop()


def test_after_a_restart_the_stored_card_is_shown_and_allow_finishes_the_turn(
    tmp_path: Path, pages: Callable[[], Page]
) -> None:
    [before] = chain.stopped_while_pending(tmp_path, chain.main_writes(), "r1")
    server = chain.restarted(tmp_path, chain.main_says("The file is written."))
    try:
        page = signed_in(pages(), server)
        page_kit.conversation_item(page, "r1").click()
        box = card(page)
        expect(box).to_have_count(1)
        expect(box.locator(".who")).to_have_text("The main agent wants to run Write")
        expect(box).to_have_attribute("data-id", before["id"])
        shot(page, "approval-after-restart.png")
        box.get_by_role("button", name="Allow").click()
        expect(box).to_have_count(0)
        reply = page.locator("#messages .msg-assistant .text").last
        expect(reply).to_have_text("The file is written.")
        assert (tmp_path / "main.txt").read_text() == "kept"
    finally:
        server.stop()


def test_reloading_the_sending_tab_keeps_a_main_agent_request(
    tmp_path: Path, pages: Callable[[], Page]
) -> None:
    models = chain.main_writes()
    models["main"].add("Written after the reload.")
    server = serverkit.ServerThread(chain.chain_runtime(tmp_path, models, with_memory=True)).start()
    try:
        page = signed_in(pages(), server)
        cid = say(page, "go")
        expect(card(page)).to_have_count(1)
        page.reload()  # the turn's stream goes with the page
        expect(page.locator("#chat-title")).to_have_attribute("data-cid", cid)
        box = card(page)
        expect(box).to_have_count(1)
        expect(box.locator(".who")).to_have_text("The main agent wants to run Write")
        box.get_by_role("button", name="Allow").click()
        expect(box).to_have_count(0)
        reply = page.locator("#messages .msg-assistant .text").last
        expect(reply).to_have_text("Written after the reload.")
        assert (tmp_path / "main.txt").read_text() == "kept"
    finally:
        server.stop()
