"""The shared task list (issue 31, item 2) on the web page: drawn from ``/v1/sessions``'
``tasks`` under the sub-agent tree, model-written subjects as text, never as markup."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from test_page import pages, say, shot, signed_in  # noqa: F401 (the pages fixture)

from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)

SUBJECT = '<img src=x id="injected"> [b]ship[/b] it'


def test_the_task_list_is_shown_under_the_tree_as_text(
    serve: Callable[..., Any],
    pages: Callable[[], Page],  # noqa: F811
) -> None:
    main = ScriptedModel(
        [
            call_tool("TaskCreate", {"subject": SUBJECT}),
            call_tool("TaskCreate", {"subject": "test it", "blocked_by": [1]}),
            call_tool("TaskUpdate", {"id": 1, "status": "in_progress"}),
            "Planned.",
        ]
    )
    server = serve(main)
    page = signed_in(pages(), server)
    say(page, "Plan the release.")
    expect(page.locator("#messages .msg-assistant .text")).to_have_text("Planned.")
    tasks = page.locator("#tasks")
    expect(tasks).to_be_visible()
    expect(page.locator("#tasks-title")).to_have_text("Task list · 0 of 2 done")
    items = page.locator("#task-list li.task")
    expect(items).to_have_count(2)
    expect(items.first).to_have_attribute("data-status", "in_progress")
    expect(items.first.locator(".node-row span").first).to_have_text(f"#1 {SUBJECT}")
    expect(items.first.locator(".node-meta")).to_contain_text("conv-")  # its owner
    expect(items.nth(1).locator(".node-meta")).to_have_text("blocked by #1")
    expect(page.locator("#injected")).to_have_count(0)  # text, not an element
    shot(page, "task-list.png")
