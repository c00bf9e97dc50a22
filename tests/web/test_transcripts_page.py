"""An ended session opens read-only on the page with its kept transcript, and the page's
search finds it (Chromium against a live server, models scripted)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from retinue.testing import ScriptedModel, call_tool
from web.test_page import Serve, console_errors, pages, say, signed_in  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(60)


def test_an_ended_session_opens_read_only_and_the_search_finds_it(
    serve: Serve,
    pages: Callable[[], Page],  # noqa: F811
) -> None:
    main = ScriptedModel([
        call_tool("SubAgent", {"task": "Look around.", "role": "scout", "interactive": True}),
        "The scout found the loader.",
        call_tool("UnloadSubAgent", {"role": "scout"}),
        "The scout has gone.",
    ])  # fmt: skip
    scout = ScriptedModel(
        [
            "Found it: config.py.",
            call_tool("memorize", {"block_updates": [], "new_passages": ["config.py loads"]}),
        ],
        name="scripted:slow",
    )
    server = serve(main, scout)
    page = signed_in(pages(), server)
    errors = console_errors(page)
    cid = say(page, "Look around with the scout.")
    last = page.locator("#messages .msg-assistant .text").last
    expect(last).to_have_text("The scout found the loader.")
    say(page, "Let the scout go.")
    expect(last).to_have_text("The scout has gone.")
    node = page.locator(f'li.node[data-id="conv-{cid}/scout"]')
    expect(node).to_have_attribute("data-state", "ended")

    node.locator(".node-name").click()
    meta = page.locator("#history-meta")
    expect(meta).to_contain_text("ended (done)")
    expect(meta).to_contain_text("read-only")
    history = page.locator("#history-list")
    expect(history.locator(".h-user .text").first).to_contain_text("Look around.")
    expect(history.locator(".h-assistant .text").first).to_have_text("Found it: config.py.")
    expect(page.locator("#session-form")).to_be_hidden()  # nothing to send to it

    page.fill("#transcript-query", "found config")
    page.click("#transcript-search button")
    hit = page.locator("#transcript-hits button")
    expect(hit).to_have_text(f"conv-{cid}/scout (scout)")
    page.click("#history-close")
    hit.click()
    expect(meta).to_contain_text(f"conv-{cid}/scout · ended (done)")
    page.wait_for_load_state("networkidle")
    assert errors == []
