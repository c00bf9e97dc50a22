"""The web page in a real browser (Debian's Chromium) against a live server, models scripted.

Screenshots go to ``tests/web/artifacts/`` (or ``$RETINUE_ARTIFACTS``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from retinue.engine.session import INTERRUPTED_NOTE
from retinue.llm.testing import Step
from retinue.server.conversations import Limits
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)
wait_for = importlib.import_module("serverkit").wait_for  # on sys.path: conftest

Serve = Callable[..., Any]  # conftest's serve(): a ServerThread (tests/server/serverkit.py)
ARTIFACTS = Path(os.environ.get("RETINUE_ARTIFACTS") or Path(__file__).with_name("artifacts"))
FIRST_LOAD_LIMIT = 300_000  # bytes transferred, all requests of a first visit together


@pytest.fixture
def pages(browser: Browser) -> Iterator[Callable[[], Page]]:
    """New pages, each in a fresh context (its own cache and sessionStorage); none may throw
    an uncaught error or break the Content-Security-Policy."""
    contexts = []
    problems: list[str] = []

    def watch(message: Any) -> None:
        if "Content Security Policy" in message.text:
            problems.append(message.text)

    def new_page() -> Page:
        context = browser.new_context(viewport={"width": 1280, "height": 760})
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
        page.on("console", watch)
        return page

    yield new_page
    for context in contexts:
        context.close()
    assert problems == []


def signed_in(page: Page, server: Any) -> Page:
    """Open the page with the token in the URL fragment (kept in sessionStorage)."""
    page.goto(f"{server.url}/#token={server.token}")
    expect(page.locator("#app")).to_be_visible()
    return page


def say(page: Page, text: str) -> str:
    """Send ``text`` in the open conversation; its id."""
    page.fill("#input", text)
    page.press("#input", "Enter")
    return page.locator("#chat-title").get_attribute("data-cid") or ""


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name))


def conversation_item(page: Page, cid: str) -> Locator:
    return page.locator(f'#conversation-list button[data-cid="{cid}"]')


def test_sign_in_chat_and_find_the_conversation_after_a_reload_and_a_restart(
    serve: Serve, pages: Callable[[], Page]
) -> None:
    server = serve(ScriptedModel(["Hello! I am the main agent.\nAsk me anything."]))
    page = pages()
    page.goto(server.url)
    expect(page.locator("#login")).to_be_visible()
    page.fill("#token", "not-the-token")
    page.click("#login-form button")
    expect(page.locator("#login-error")).to_contain_text("refused")
    page.fill("#token", server.token)
    page.click("#login-form button")
    expect(page.locator("#app")).to_be_visible()

    cid = say(page, "Say hello <b>bold</b>")
    reply = page.locator("#messages .msg-assistant").last
    expect(reply.locator(".text")).to_have_text("Hello! I am the main agent.\nAsk me anything.")
    expect(reply.locator(".meta")).to_contain_text("tokens")
    expect(page.locator("#messages .msg-user .text")).to_have_text("Say hello <b>bold</b>")
    expect(page.locator("#messages .msg-user b")).to_have_count(0)
    expect(conversation_item(page, cid)).to_be_visible()
    expect(page.locator("#send")).to_be_enabled()

    page.reload()  # the token stays in this tab's sessionStorage
    expect(page.locator("#app")).to_be_visible()
    conversation_item(page, cid).click()
    expect(page.locator("#chat-title")).to_have_text("Say hello <b>bold</b>")  # its title
    expect(page.locator("#messages .msg-user .text")).to_have_text("Say hello <b>bold</b>")
    expect(page.locator("#messages .msg-assistant .text")).to_contain_text("I am the main agent")
    shot(page, "chat-after-reload.png")

    server.stop()  # and a new server on the same data directory (a new port: sign in anew)
    model = ScriptedModel(["Yes: you asked me to say hello."])
    again = serve(model)
    page = signed_in(pages(), again)
    conversation_item(page, cid).click()
    expect(page.locator("#messages .msg-user .text")).to_have_text("Say hello <b>bold</b>")
    say(page, "Do you remember?")
    expect(page.locator("#messages .msg-assistant .text").last).to_have_text(
        "Yes: you asked me to say hello."
    )
    assert [m.role for m in model.calls[0].messages] == [
        "system",
        "user",
        "assistant",
        "user",
    ]

    page.once("dialog", lambda dialog: dialog.accept())  # "Delete conversation …?"
    page.click("#delete-conversation")
    expect(conversation_item(page, cid)).to_have_count(0)
    with again.client() as client:
        assert client.get("/v1/conversations").json()["conversations"] == []


def test_a_first_visit_transfers_at_most_300_kb(serve: Serve, pages: Callable[[], Page]) -> None:
    server = serve(ScriptedModel(["An answer."]))
    with server.client() as client:
        client.post("/v1/conversations/first/messages", json={"content": "hi"})
    page = pages()
    sizes: dict[str, int] = {}

    def count(request: Any) -> None:
        s = request.sizes()
        sizes[request.url] = sizes.get(request.url, 0) + sum(s.values())

    page.on("requestfinished", count)
    signed_in(page, server)
    expect(page.locator("#messages .msg-assistant .text")).to_have_text("An answer.")
    page.wait_for_load_state("networkidle")
    assert {f"{server.url}/", f"{server.url}/static/app.js", f"{server.url}/static/app.css"} <= set(
        sizes
    )
    assert 10_000 < sum(sizes.values()) <= FIRST_LOAD_LIMIT, sizes


def test_the_sub_agent_tree_grows_opens_histories_and_interrupts(
    serve: Serve, pages: Callable[[], Page]
) -> None:
    main = ScriptedModel(
        [
            "Sure. What shall I find?",
            call_tool(
                "SubAgent",
                {"task": "Find where settings are loaded.", "role": "lead", "interactive": True},
            ),
            call_tool(  # the lead's turn (it runs on the main model)
                "SubAgent",
                {"task": "Look through src/ for the loader.", "role": "scout", "interactive": True},
            ),
            "The scout was stopped; I found it myself: config.py loads the settings.",
            "The lead reports: config.py loads the settings.",
        ]
    )
    scout_model = ScriptedModel(["never said"], name="scripted:slow", delay=60)
    server = serve(main, scout_model)
    page = signed_in(pages(), server)
    say(page, "Let's look at this repository together.")
    expect(page.locator("#messages .msg-assistant .text")).to_have_text("Sure. What shall I find?")
    cid = say(page, "Where are the settings loaded?")
    lead_id, scout_id = f"conv-{cid}/lead", f"conv-{cid}/lead/scout"
    lead = page.locator(f'li.node[data-id="{lead_id}"]')
    scout = lead.locator(f'li.node[data-id="{scout_id}"]')  # nested under its parent
    expect(scout).to_have_attribute("data-state", "running")
    expect(lead).to_have_attribute("data-state", "running")
    expect(page.locator("#stop")).to_be_visible()

    scout.locator(".node-name").click()
    history = page.locator("#history")
    expect(history.locator("#history-title")).to_have_text("scout")
    expect(history.locator(".h-user .text")).to_have_text("Look through src/ for the loader.")
    shot(page, "tree-running.png")
    history.locator("#session-input").fill("Also look in tests/.")
    history.locator("#session-send").click()
    expect(history.locator("#session-sent")).to_contain_text("Steering message sent")

    scout.get_by_role("button", name="Interrupt").click()
    expect(scout).to_have_attribute("data-state", "idle")
    final = page.locator("#messages .msg-assistant .text").last
    expect(final).to_have_text("The lead reports: config.py loads the settings.")
    expect(lead).to_have_attribute("data-state", "idle")
    expect(lead.locator(".node-reply").first).to_contain_text("config.py loads the settings")
    expect(lead.locator(".node-meta").first).to_contain_text("1 turn")
    expect(scout.get_by_role("button", name="Interrupt")).to_have_count(0)
    scout.locator(".node-name").click()
    expect(history.locator(".h-assistant .text")).to_have_text(INTERRUPTED_NOTE)
    shot(page, "tree-done.png")
    with server.client() as client:
        kept = client.get(f"/v1/sessions/{scout_id}").json()
        lead_history = client.get(f"/v1/sessions/{lead_id}").json()["history"]
    assert kept["state"] == "idle" and kept["history"][-1]["content"] == INTERRUPTED_NOTE
    # the steering sent just before the interrupt is not lost: it waits for the next turn
    [scouted] = [m for m in lead_history if m["role"] == "tool"]
    assert "1 steering message(s) not seen yet, kept for its next turn" in scouted["content"]


def test_the_stop_button_cancels_the_main_turn(serve: Serve, pages: Callable[[], Page]) -> None:
    model = ScriptedModel(["never said"], delay=60)
    server = serve(model)
    page = signed_in(pages(), server)
    cid = say(page, "Take your time.")
    expect(page.locator("#turn-state")).to_have_text("working…")
    with server.client() as client:
        wait_for(lambda: model.call_count == 1)
        page.click("#stop")
        expect(page.locator("#messages .msg-assistant .meta")).to_contain_text("Stopped")
        expect(page.locator("#send")).to_be_enabled()
        main_node = page.locator(f'li.node[data-id="conv-{cid}"]')
        expect(main_node).to_have_attribute("data-state", "stopped")
        meta = main_node.locator(".node-meta")  # not "0 turns · thinking" forever
        expect(meta).to_contain_text("1 turn")
        expect(meta).not_to_contain_text("thinking")

        def idle() -> bool:
            [c] = client.get("/v1/conversations").json()["conversations"]
            return c["id"] == cid and not c["running"]

        wait_for(idle)


def test_errors_are_shown_plainly(serve: Serve, pages: Callable[[], Page]) -> None:
    broken = serve(ScriptedModel())  # every model call fails: the provider "is down"
    page = signed_in(pages(), broken)
    say(page, "Hello?")
    expect(page.locator("#error")).to_be_visible()
    expect(page.locator("#error-text")).to_contain_text("The model is unreachable")
    expect(page.locator("#messages .msg-assistant .meta.bad")).to_contain_text("unscripted call")
    expect(page.locator("li.node").first).to_have_attribute("data-state", "failed")
    shot(page, "error-model.png")

    budget = serve(
        ScriptedModel(
            [
                call_tool("SubAgent", {"task": "First look.", "role": "lead", "interactive": True}),
                "Looked once.",  # the lead's turn: its session's budget is now spent
                call_tool("SubAgent", {"task": "Look again.", "role": "lead", "interactive": True}),
                "The lead is out of budget.",
            ]
        ),
        session_token_budget=1,
    )
    page = signed_in(pages(), budget)
    page.click("#new-conversation")  # the store (same data directory) still has the first
    cid = say(page, "Ask the lead twice.")
    expect(page.locator("#messages .msg-assistant .text")).to_have_text(
        "The lead is out of budget."
    )
    main_node = page.locator(f'li.node[data-id="conv-{cid}"] > .node-problem')
    expect(main_node).to_contain_text("Budget reached")
    expect(main_node).to_contain_text("its budget is 1")
    shot(page, "error-budget.png")

    busy = serve(ScriptedModel(), limits=Limits(max_turns=0))
    page = signed_in(pages(), busy)
    say(page, "Hello?")
    expect(page.locator("#error-text")).to_contain_text("The server is busy")

    page.evaluate("sessionStorage.setItem('retinue.token', 'stale')")
    page.reload()
    expect(page.locator("#login")).to_be_visible()
    expect(page.locator("#login-error")).to_contain_text("refused")


def console_errors(page: Page) -> list[str]:
    """The page's console errors from now on (a failed request shows there as one)."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return errors


def scout_chat(serve: Serve, pages: Callable[[], Page], *then: Step) -> tuple[Any, Page, str]:
    """A conversation whose main agent opened an interactive scout session (and said
    ``then`` after); the server, the page and the conversation's id."""
    main = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "Look around.", "role": "scout", "interactive": True}),
            "The scout found the loader.",
            *then,
        ]
    )
    scout = ScriptedModel(["Found it: config.py."], name="scripted:slow")
    server = serve(main, scout)
    page = signed_in(pages(), server)
    cid = say(page, "Look around with the scout.")
    expect(page.locator("#messages .msg-assistant .text").last).to_have_text(
        "The scout found the loader."
    )
    return server, page, cid


def test_the_live_chat_shows_tool_calls_collapsed_as_a_reloaded_one_does(
    serve: Serve, pages: Callable[[], Page]
) -> None:
    _server, page, _cid = scout_chat(serve, pages)
    for when in ("live", "reloaded"):
        call = page.locator("#messages details.msg-tool")
        expect(call).to_have_count(1)
        expect(call).to_have_attribute("data-tool", "SubAgent")
        expect(call.locator("summary")).to_contain_text("→ SubAgent")
        expect(call.locator("summary")).to_contain_text('"role": "scout"')
        expect(call).not_to_have_attribute("open", "")  # collapsed
        expect(call.locator(".tool-detail.result")).to_be_hidden()
        call.locator("summary").click()
        expect(call.locator(".tool-detail.result")).to_contain_text("Found it: config.py.")
        # the call comes before the answer, as in the stored history
        kinds = page.locator("#messages > *").evaluate_all("els => els.map(e => e.className)")
        assert [k.split()[1] for k in kinds] == ["msg-user", "msg-tool", "msg-assistant"], when
        page.reload()


def test_an_ended_session_shows_as_ended_without_a_404(
    serve: Serve, pages: Callable[[], Page]
) -> None:
    unload = call_tool("UnloadSubAgent", {"role": "scout"})
    _server, page, cid = scout_chat(serve, pages, unload, "The scout has gone.")
    errors = console_errors(page)
    node = page.locator(f'li.node[data-id="conv-{cid}/scout"]')
    expect(node).to_have_attribute("data-state", "idle")
    node.locator(".node-name").click()
    meta = page.locator("#history-meta")
    expect(meta).to_contain_text("idle · 1 turn")
    expect(meta).to_contain_text("tokens · cost unknown")  # a scripted model has no price
    say(page, "Let the scout go.")  # the open panel follows the session's end
    expect(node).to_have_attribute("data-state", "ended")
    expect(meta).to_contain_text("This session has ended")
    expect(meta).not_to_contain_text("idle")
    page.click("#history-close")
    node.locator(".node-name").click()  # an ended session: no request for its history
    expect(meta).to_contain_text("This session has ended")
    page.wait_for_load_state("networkidle")
    assert errors == []


def test_an_open_history_follows_its_session_ended_by_another_client(
    serve: Serve, pages: Callable[[], Page]
) -> None:
    unload = call_tool("UnloadSubAgent", {"role": "scout"})
    server, page, cid = scout_chat(serve, pages, unload, "The scout has gone.")
    node = page.locator(f'li.node[data-id="conv-{cid}/scout"]')
    node.locator(".node-name").click()
    meta = page.locator("#history-meta")
    expect(meta).to_contain_text("idle · 1 turn")
    with server.client() as client:  # not from this page: no events reach it
        sent = client.post(f"/v1/conversations/{cid}/messages", json={"content": "Unload it."})
        assert sent.json()["content"] == "The scout has gone."
    expect(meta).to_contain_text("This session has ended")
    expect(node).to_have_attribute("data-state", "ended")


def test_the_tree_is_drawn_again_from_the_history_after_a_restart(
    serve: Serve, pages: Callable[[], Page]
) -> None:
    server, _page, cid = scout_chat(serve, pages)
    server.stop()  # a new server on the same data directory: the events are gone
    page = signed_in(pages(), serve(ScriptedModel()))
    errors = console_errors(page)
    conversation_item(page, cid).click()
    node = page.locator(f'li.node[data-id="conv-{cid}/scout"]')
    expect(node).to_have_attribute("data-state", "ended")  # sessions are not stored
    expect(node.locator(".node-reply")).to_have_text("Found it: config.py.")
    expect(node.locator(".node-meta")).to_contain_text("1 turn")
    expect(page.locator("#tree-empty")).to_be_hidden()
    node.locator(".node-name").click()
    expect(page.locator("#history-meta")).to_contain_text("This session has ended")
    shot(page, "tree-after-restart.png")
    page.wait_for_load_state("networkidle")
    assert errors == []


def test_an_unreachable_server_is_said_once(serve: Serve, pages: Callable[[], Page]) -> None:
    server = serve(ScriptedModel())
    page = signed_in(pages(), server)
    server.stop()
    page.click("#refresh")
    expect(page.locator("#error-text")).to_have_text("The server cannot be reached.")


def test_on_a_phone_the_chat_fills_the_screen(serve: Serve, pages: Callable[[], Page]) -> None:
    server = serve(ScriptedModel(["Hello from a phone."]))
    page = pages()
    page.set_viewport_size({"width": 390, "height": 844})
    signed_in(page, server)
    say(page, "hi")
    expect(page.locator("#messages .msg-assistant .text")).to_have_text("Hello from a phone.")
    chat = page.locator("#messages").bounding_box()
    composer = page.locator("#composer").bounding_box()
    assert chat is not None and composer is not None
    assert chat["height"] >= 844 / 2, chat  # was 112 px
    assert chat["width"] >= 300 and composer["y"] + composer["height"] <= 844, composer
    shot(page, "phone.png")


def test_openai_endpoint_chats_are_titled_by_their_user_and_hidden_until_asked_for(
    serve: Serve, pages: Callable[[], Page]
) -> None:
    server = serve(ScriptedModel(["Paris.", "Rome.", "Hello."]))
    with server.client() as client:
        for question in ("What is the capital of France?", "And of Italy?"):
            sdk = client.post(
                "/v1/chat/completions",
                json={
                    "model": "retinue",
                    "messages": [
                        {"role": "system", "content": "You are terse."},
                        {"role": "user", "content": question},
                    ],
                },
            )
            assert sdk.status_code == 200, sdk.text
        listed = client.get("/v1/conversations").json()["conversations"]
    titles = {c["title"] for c in listed}
    assert titles == {"What is the capital of France?", "And of Italy?"}, titles
    page = signed_in(pages(), server)
    say(page, "A chat of my own")
    expect(page.locator("#messages .msg-assistant .text")).to_have_text("Hello.")
    items = page.locator("#conversation-list button")
    expect(items).to_have_count(1)
    expect(items.first).to_have_attribute("data-source", "chat")
    expect(page.locator("label.filter")).to_contain_text("2 hidden")
    page.check("#show-api")
    expect(items).to_have_count(3)
    api = page.locator('#conversation-list button[data-source="api"]')
    expect(api).to_have_count(2)
    expect(api.locator(".name")).to_have_text(["And of Italy?", "What is the capital of France?"])
    expect(api.first).to_contain_text("API")
    page.reload()  # the choice is kept in this tab
    expect(page.locator("#conversation-list button")).to_have_count(3)
