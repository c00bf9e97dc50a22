"""``retinue serve --temporal`` attacked over HTTP, as an outsider or a curious second tenant
would: one dev server, one front end (uvicorn on 127.0.0.1), a worker for each of two tenants
(the service's own, ``default``, and the named token ``bo``'s, on ``<queue>-bo``), scripted
models. Both tenants hold a conversation of the same id, each with a sub-agent session in it.

What holds: another tenant's sessions, conversations and approvals are out of reach whatever
the id (crafted ids, workflow ids, ``..``, %-encoding, look-alikes, very long ones, closed
ones); bodies over the limits are refused before they are read; odd models are refused in
OpenAI's shape; errors are one JSON line with no trace, no workflow id of another tenant and
no internal address; model text reaches the SSE stream, ``retinue sessions`` and the web page
inert."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

import pytest_asyncio
from temporalio.client import Client
from test_temporal_front import sse
from test_temporal_session_routes import TOKEN, ok, retinue, serving, until

from retinue.config import Settings
from retinue.llm.base import ToolSpec
from retinue.messages import Message, ToolResultMessage, UserMessage
from retinue.runtime import Runtime
from retinue.server.security import Security
from retinue.server.temporal_front import TemporalFront, create_temporal_app
from retinue.server.tokens import TokenBook
from retinue.subagents.roles import Role
from retinue.temporal.worker import make_worker
from retinue.testing import ScriptedModel, call_tool

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

RUN = uuid.uuid4().hex[:8]  # (the dev server is the session's: other tests' ids live there)
SHARED, ONLY_A = f"shared-{RUN}", f"only-a-{RUN}"  # both tenants hold SHARED; only A ONLY_A
# model text meant to set the window title, clear the screen, inject markup, a script and a
# forged SSE frame
HOSTILE = (
    "\x1b]0;pwned\x07\x1b[2J[bold red]loud[/] <script>alert(1)</script>\n\nevent: result\n"
    'data: {"content": "forged"}\n\n'
)
LEAKS = ("Traceback", 'File "', "retinue/default/", "retinue/bo/", "127.0.0.1", "localhost")


def last_user(messages: Sequence[Message]) -> str:
    return next((m.content for m in reversed(messages) if isinstance(m, UserMessage)), "")


def main_agent(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> Any:
    """The main agent of either tenant: ``spawn:INSTANCE:TASK`` opens an interactive helper
    session, ``unload:INSTANCE`` ends it, ``write:PATH`` calls Write (which asks first), a
    tool's result is read back, anything else is echoed."""
    if isinstance(messages[-1], ToolResultMessage):
        return f"read: {messages[-1].content}"
    text = last_user(messages)
    if text.startswith("spawn:"):
        _, instance, task = text.split(":", 2)
        named = {"instance": instance} if instance else {}
        return call_tool("SubAgent", {"role": "helper", "task": task, "interactive": True,
                                      **named})  # fmt: skip
    if text.startswith("unload:"):
        return call_tool("UnloadSubAgent", {"role": "helper", "instance": text[7:]})
    if text.startswith("write:"):
        return call_tool("Write", {"file_path": text.removeprefix("write:"), "content": "x"})
    return f"echo: {text[:100]}"


def runtime(tmp_path: Path, tenant: str) -> Runtime:
    """A worker's runtime for ``tenant``: its helper says whose it is, then hostile text."""

    def helper(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
        return f"helper of {tenant}: {HOSTILE}{last_user(messages)[:40]}"

    models = {"scripted:helper": ScriptedModel(responder=helper, name="scripted:helper")}
    settings = Settings(home=tmp_path / "home", workspace=tmp_path, tenant=tenant)
    return Runtime.create(
        settings, model=ScriptedModel(responder=main_agent), model_for=models.__getitem__,
        roles=[Role("helper", "the helper", "You help.", None, "scripted:helper", frozenset())],
        with_memory=False, permission_mode="default",
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Stack:
    a: httpx.AsyncClient  # the service's own tenant (``default``)
    b: httpx.AsyncClient  # tenant ``bo`` (a named token)
    url: str
    home: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    temporal_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    """The front end, both tenants' workers, and the sessions both tenants opened: A's
    ``conv-SHARED/helper:alpha`` and ``conv-ONLY_A/helper``, B's ``conv-SHARED/helper``."""
    tmp_path = tmp_path_factory.mktemp("attacks")
    book = TokenBook(tmp_path / "home")
    bo = book.issue("bo")
    client = await Client.connect(temporal_address)
    queue = f"attacks-{uuid.uuid4().hex}"
    front = TemporalFront(client, task_queue=queue)
    app = create_temporal_app(front, Security.build(TOKEN, tokens=book))
    async with (
        make_worker(client, runtime(tmp_path, "default"), queue),
        make_worker(client, runtime(tmp_path, "bo"), f"{queue}-bo"),
        serving(app) as url,
        httpx.AsyncClient(base_url=url, timeout=60,
                          headers={"Authorization": f"Bearer {TOKEN}"}) as a,
        httpx.AsyncClient(base_url=url, timeout=60,
                          headers={"Authorization": f"Bearer {bo}"}) as b,
    ):  # fmt: skip
        for http, cid, text in ((a, SHARED, "spawn:alpha:task of A"),
                                (b, SHARED, "spawn::task of B"),
                                (a, ONLY_A, "spawn::only A's")):  # fmt: skip
            ok(await http.post(f"/v1/conversations/{cid}/messages", json={"content": text}))
        yield Stack(a, b, url, tmp_path)


def refused(response: httpx.Response, status: int = 404) -> str:
    """The one-line error of a refusal with ``status``: JSON, no trace, no workflow id, no
    internal address."""
    assert response.status_code == status, (response.request.url, response.text)
    assert response.headers["content-type"] == "application/json"
    message = response.json()["error"]
    assert isinstance(message, str) and "\n" not in message
    sent = unquote(response.request.url.raw_path.decode())  # (what it echoes is the caller's)
    assert not [leak for leak in LEAKS if leak in response.text and leak not in sent], message
    return message


async def raw(stack: Stack, method: str, target: str) -> bytes:
    """One request whose target goes on the wire as written (httpx would resolve ``..``);
    the whole answer."""
    host, port = stack.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    auth = stack.a.headers["authorization"]
    writer.write(f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\n"
                 "Content-Length: 0\r\nConnection: close\r\n\r\n".encode())  # fmt: skip
    await writer.drain()
    try:
        return await reader.read()
    except ConnectionResetError:  # (a request line over the server's limit: refused, closed)
        return b""
    finally:
        writer.close()


async def test_a_tenant_reaches_no_session_of_another(stack: Stack) -> None:
    a, b = stack.a, stack.b
    alpha, theirs = f"conv-{SHARED}/helper:alpha", f"conv-{SHARED}/helper"
    b_listed = ok(await b.get("/v1/sessions"))["sessions"]
    a_listed = {s["id"]: s for s in ok(await a.get("/v1/sessions"))["sessions"]}
    b_own = ok(await b.get(f"/v1/sessions/{theirs}"))
    # the same conversation id in both tenants: each sees its own tree, and only it
    assert [s["id"] for s in b_listed] == [theirs]
    assert b_listed[0]["last_reply"].startswith("helper of bo: ")
    assert {alpha, f"conv-{ONLY_A}/helper"} <= a_listed.keys() and theirs not in a_listed
    assert a_listed[alpha]["last_reply"].startswith("helper of default: ")
    assert "task of B" in b_own["history"][0]["content"]
    for http, own in ((a, alpha), (b, theirs)):  # (one tree each, of the same name)
        for params in ({"team": f"conv-{SHARED}"}, {"parent": f"conv-{SHARED}"}):
            listed = ok(await http.get("/v1/sessions", params=params))["sessions"]
            assert [s["id"] for s in listed] == [own]
    assert "task of A" not in str(b_own)

    probes = [  # (each: what B asks of A's, or A of B's)
        await b.get(f"/v1/sessions/{alpha}"),
        await a.get(f"/v1/sessions/{theirs}"),
        await b.get(f"/v1/sessions/conv-{ONLY_A}/helper"),
    ]
    for verb in ("interrupt", "answer", "steer"):
        probes += [
            await b.post(f"/v1/sessions/{alpha}/{verb}", json={"content": "x"}),
            await a.post(f"/v1/sessions/{theirs}/{verb}", json={"content": "x"}),
            await b.post(f"/v1/sessions/conv-{ONLY_A}/helper/{verb}", json={"content": "x"}),
            await b.post(f"/v1/sessions/conv-{ONLY_A}/{verb}", json={"content": "x"}),
        ]
    for response in probes:  # (404, never 409: a refusal would tell that it exists)
        refused(response)
    for params in ({"team": f"conv-{ONLY_A}"}, {"parent": f"conv-{ONLY_A}"},
                   {"parent": f"conv-{ONLY_A}/helper"}, {"parent": alpha},
                   {"team": f"retinue/default/{ONLY_A}"}):  # fmt: skip
        assert ok(await b.get("/v1/sessions", params=params)) == {"sessions": [], "tasks": {}}
    refused(await b.get(f"/v1/conversations/{ONLY_A}"))
    assert ok(await b.get(f"/v1/conversations/{ONLY_A}/approvals")) == {"approvals": []}
    # A's own session: answer and steer are 409 (not served on Temporal), interrupt works
    refused(await a.post(f"/v1/sessions/{alpha}/steer", json={"content": "x"}), 409)
    interrupted = ok(await a.post(f"/v1/sessions/{alpha}/interrupt"))
    assert interrupted == {"id": alpha, "interrupted": False}


CRAFTED = [  # session ids that name no node of A's trees (A's own requests)
    "conv-",
    "conv-/helper",
    f"conv-{SHARED}/",
    f"conv-{SHARED}//helper:alpha",
    f"retinue/default/{SHARED}/helper:alpha",
    f"retinue%2Fdefault%2F{SHARED}%2Fhelper:alpha",
    f"conv-{SHARED}/%2e%2e/{ONLY_A}/helper",
    f"conv-{SHARED}/helper:alpha/",
    f"conv-{SHARED}/helper:alpha%00",
    f"conv-{SHARED}/h\u0435lper:alpha",  # (Cyrillic e)
    f"\uff43\uff4f\uff4e\uff56-{SHARED}/helper:alpha",
    f"conv-{SHARED}\u200b/helper:alpha",
    f"CONV-{SHARED}/helper:alpha",
    "conv-" + "a" * 65,
    f"conv-{SHARED}/" + "x" * 5_000,
    "conv-..",
    "conv-.",
    "conv-%F0%9F%98%80",
    "conv-%ff%fe",
    f"conv-{SHARED}/helper:alpha%0d%0a",
]


async def test_crafted_session_and_conversation_ids_name_nothing(stack: Stack) -> None:
    answers: list[httpx.Response] = []
    for sid in CRAFTED:
        path = "/v1/sessions/" + quote(sid, safe="/%:-.")
        answers.append(await stack.a.get(path))
        answers += [await stack.a.post(f"{path}/{verb}") for verb in ("interrupt", "steer")]
    answers.append(await stack.a.get("/v1/sessions/"))  # empty
    for response in answers:
        refused(response)
    # ".." on the wire, as written: the route takes it as part of the id, which names nothing
    for target in (f"/v1/sessions/conv-{SHARED}/helper:alpha/../interrupt",
                   f"/v1/sessions/conv-{SHARED}/../conv-{ONLY_A}/helper",
                   f"/v1/sessions/../conversations/{ONLY_A}"):  # fmt: skip
        method = "POST" if target.endswith("interrupt") else "GET"
        assert (await raw(stack, method, target)).startswith(b"HTTP/1.1 404 "), target
    for cid in ("%2e%2e", "-a", "a" * 65, "a%0a", "a%00", "\u0430", "a:b", "a%20b"):
        base = "/v1/conversations/" + quote(cid, safe="%")
        for method, path in (("GET", base), ("GET", f"{base}/approvals"),
                             ("POST", f"{base}/messages"), ("DELETE", base),
                             ("POST", f"{base}/approvals/x")):  # fmt: skip
            body = {"allow": True} if "approvals/" in path else {"content": "x"}
            refused(await stack.a.request(method, path, json=body), 400)
    long_team = {"team": "conv-" + "y" * 20_000, "parent": "conv-" + "y" * 20_000}
    assert ok(await stack.a.get("/v1/sessions", params=long_team))["sessions"] == []
    # a request line past the server's limit is refused, and nothing of it answered back
    huge = await raw(stack, "GET", "/v1/sessions/conv-x/" + "y" * 200_000)
    assert huge == b"" or huge.startswith(b"HTTP/1.1 400 ")
    assert b"Traceback" not in huge and b"yyyy" not in huge


async def test_another_tenants_approval_is_out_of_reach(stack: Stack) -> None:
    a, b = stack.a, stack.b
    target = stack.home / f"approved-{RUN}.txt"
    turn = asyncio.create_task(a.post(f"/v1/conversations/{SHARED}/messages",
                                      json={"content": f"write:{target}"},
                                      headers={"Idempotency-Key": f"key-{RUN}"}))  # fmt: skip

    async def pending() -> list[dict[str, Any]]:
        return ok(await a.get(f"/v1/conversations/{SHARED}/approvals"))["approvals"]

    async def asked() -> bool:
        return bool(await pending())

    await until(asked)
    [request] = await pending()
    aid = request["id"]
    url = f"/v1/conversations/{SHARED}/approvals/{aid}"
    # B holds a conversation of the same id: its requests reach B's workflow, never A's
    assert ok(await b.get(f"/v1/conversations/{SHARED}/approvals")) == {"approvals": []}
    refused(await b.post(url, json={"allow": True, "always": True}))
    # B's message with A's Idempotency-Key is B's own turn, not A's waiting one
    mine = ok(await b.post(f"/v1/conversations/{SHARED}/messages", json={"content": "mine"},
                           headers={"Idempotency-Key": f"key-{RUN}"}))  # fmt: skip
    assert mine["content"] == "echo: mine"
    refused(await b.post(url, json={"allow": True}))
    refused(await b.post(f"/v1/conversations/{ONLY_A}/approvals/{aid}", json={"allow": True}))
    # crafted answers from A itself
    refused(await a.post(f"/v1/conversations/{SHARED}/approvals/{'z' * 5_000}",
                         json={"allow": True}))  # fmt: skip
    refused(await a.post(f"/v1/conversations/{SHARED}/approvals/{aid}/..%2f..%2fx",
                         json={"allow": True}))  # fmt: skip
    refused(await a.post(f"/v1/conversations/{SHARED}/approvals/{aid}",
                         content=b"{" * 2_000_000), 413)  # fmt: skip
    for bad in ({"allow": "yes please"}, {"allow": True, "evil": 1},
                {"allow": True, "message": "m" * 2_001}):  # fmt: skip
        assert (await a.post(url, json=bad)).status_code == 422
    assert [r["id"] for r in await pending()] == [aid]  # still A's to answer
    assert ok(await a.post(url, json={"allow": False, "message": "no"}))["answered"] == aid
    reply = ok(await turn)
    assert "did not approve" in reply["content"] and not target.exists()


async def test_the_front_door_answers_alike_for_what_exists_and_what_does_not(
    stack: Stack,
) -> None:
    """Without the token, from a foreign Host or Origin, every route is refused before it
    runs: the same answer for A's live session as for an id that names nothing."""
    alpha, nothing = f"conv-{SHARED}/helper:alpha", f"conv-{SHARED}/nobody"
    routes = [("GET", "/v1/sessions"), ("GET", f"/v1/conversations/{SHARED}"),
              ("GET", f"/v1/conversations/{SHARED}/approvals"),
              ("POST", f"/v1/conversations/{SHARED}/messages"),
              ("DELETE", f"/v1/conversations/{SHARED}")]  # fmt: skip
    for sid in (alpha, nothing):
        routes += [("GET", f"/v1/sessions/{sid}"), ("POST", f"/v1/sessions/{sid}/interrupt")]
    wrong = [({"Authorization": ""}, 401), ({"Authorization": "Bearer nope"}, 401),
             ({"Authorization": "Bearer " + "x" * 10_000}, 401),
             ({"Host": "evil.example"}, 421), ({"Origin": "http://evil.example"}, 403)]  # fmt: skip
    seen: dict[tuple[str, int], set[str]] = {}
    for method, path in routes:
        for headers, status in wrong:
            answer = await stack.a.request(method, path, headers=headers, json={"content": "x"})
            message = refused(answer, status).replace(path, "")
            seen.setdefault((str(headers), status), set()).add(message)
    assert all(len(messages) == 1 for messages in seen.values()), seen  # (no oracle)
    assert ok(await stack.a.get(f"/v1/sessions/{alpha}"))["id"] == alpha  # (it does exist)


async def test_closed_sessions_and_conversations_are_gone(stack: Stack) -> None:
    a, cid = stack.a, f"closed-{RUN}"
    ok(await a.post(f"/v1/conversations/{cid}/messages", json={"content": "spawn:one:first"}))
    ok(await a.post(f"/v1/conversations/{cid}/messages", json={"content": "spawn:two:second"}))
    ok(await a.get(f"/v1/sessions/conv-{cid}/helper:one"))
    ok(await a.post(f"/v1/conversations/{cid}/messages", json={"content": "unload:one"}))
    refused(await a.get(f"/v1/sessions/conv-{cid}/helper:one"))  # unloaded, its tree goes on
    refused(await a.post(f"/v1/sessions/conv-{cid}/helper:one/interrupt"))
    ok(await a.delete(f"/v1/conversations/{cid}"))

    async def closed() -> bool:  # (DELETE signals the workflow: it closes a moment later)
        return (await a.get(f"/v1/conversations/{cid}")).status_code == 404

    await until(closed)
    refused(await a.get(f"/v1/sessions/conv-{cid}/helper:two"))
    for verb in ("interrupt", "answer", "steer"):
        refused(await a.post(f"/v1/sessions/conv-{cid}/helper:two/{verb}"))
    refused(await a.post(f"/v1/sessions/conv-{cid}/interrupt"))
    assert ok(await a.get("/v1/sessions", params={"team": f"conv-{cid}"}))["sessions"] == []
    assert ok(await a.get(f"/v1/conversations/{cid}/approvals")) == {"approvals": []}
    refused(await a.post(f"/v1/conversations/{cid}/approvals/x", json={"allow": True}))
    # the id used again is a new conversation: nothing of the closed one comes back
    ok(await a.post(f"/v1/conversations/{cid}/messages", json={"content": "anew"}))
    again = ok(await a.get(f"/v1/conversations/{cid}"))["messages"]
    assert [m["content"] for m in again] == ["anew", "echo: anew"]
    refused(await a.get(f"/v1/sessions/conv-{cid}/helper:two"))
    assert ok(await a.get("/v1/sessions", params={"team": f"conv-{cid}"}))["sessions"] == []


async def test_oversized_and_malformed_bodies_are_refused(stack: Stack) -> None:
    a, url = stack.a, f"/v1/conversations/body-{RUN}/messages"
    json_type = {"content-type": "application/json"}
    refused(await a.post(url, content=b"x" * (64 * 2**20 + 1)), 413)  # past --max-media-body
    refused(await a.post(f"/v1/sessions/conv-{SHARED}/helper:alpha/steer",
                         content=b"x" * 1_000_001), 413)  # fmt: skip
    images = {"content": "x", "parts": [{"type": "image", "media_type": "image/png",
                                         "data": "AAAA"}]}  # fmt: skip
    assert "images and PDFs" in refused(await a.post(url, json=images), 400)
    deep = b'{"content": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    refused(await a.post(url, content=deep, headers=json_type), 400)
    refused(await a.post(url, content=b'{"content": "\xff\xfe', headers=json_type), 400)
    for bad in ({"content": "a" * 1_000_001}, {"content": ""}, {"content": "x", "evil": 1}):
        assert (await a.post(url, json=bad)).status_code == 422
    long_key = {"Idempotency-Key": "k" * 201}
    assert (await a.post(url, json={"content": "x"}, headers=long_key)).status_code == 422
    refused(await a.get(f"/v1/conversations/body-{RUN}"))  # none of them started a turn


def chat(model: str, content: str = "hi") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}]}


async def test_the_openai_endpoint_refuses_odd_models_and_other_tenants(stack: Stack) -> None:
    a, b = stack.a, stack.b
    odd = ["retinue/", "retinue/../x", "retinue/a/b", "RETINUE", "retinue\n", "retinue/<script>",
           "retinue/helper:alpha", "retinue/ helper", "openai:gpt-4o", "retinue/\u0435",
           "retinue/" + "a" * 65]  # fmt: skip
    for model in [*odd, "retinue/nosuchrole"]:  # (the last: no role the workers know)
        response = await a.post("/v1/chat/completions", json=chat(model))
        assert response.status_code == 404, (model, response.text)
        error = response.json()["error"]
        assert error["type"] == "not_found_error" and "Traceback" not in response.text
    header = {"X-Retinue-Conversation": "../x"}
    refused_oai = await a.post("/v1/chat/completions", json=chat("retinue"), headers=header)
    assert refused_oai.status_code == 400 and "error" in refused_oai.json()
    # B names A's conversation: B's own conversation of that id, A's untouched
    before = ok(await a.get(f"/v1/conversations/{ONLY_A}"))["messages"]
    answer = ok(await b.post("/v1/chat/completions", json=chat("retinue", "what did A say?"),
                             headers={"X-Retinue-Conversation": ONLY_A}))  # fmt: skip
    assert answer["choices"][0]["message"]["content"] == "echo: what did A say?"
    assert ok(await a.get(f"/v1/conversations/{ONLY_A}"))["messages"] == before
    b_history = ok(await b.get(f"/v1/conversations/{ONLY_A}"))["messages"]
    assert [m["content"] for m in b_history] == ["what did A say?", "echo: what did A say?"]


async def test_model_text_reaches_the_stream_terminal_and_page_inert(stack: Stack) -> None:
    a, sid = stack.a, f"conv-{SHARED}/helper:alpha"
    streamed = await a.post(f"/v1/conversations/{SHARED}/messages?stream=true",
                            json={"content": "spawn:alpha:again"})  # fmt: skip
    frames = sse(streamed)
    # the forged "event: result" inside the model's text stays text: one result, the last
    assert [kind for kind, _ in frames].count("result") == 1 and frames[-1][0] == "result"
    assert HOSTILE in str(frames[-1][1]["content"])
    table = await retinue(["sessions"], a, stack.home / "cli")
    assert "\x1b" not in table and "\x07" not in table
    assert "helper of default: \u241b]0;pwned\u2407\u241b[2J[bold red]loud[/]" in table
    assert sid in table
    # an id that carries markup comes back as JSON text, never as a page
    echoed = await a.get("/v1/sessions/conv-x/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert "<script>" in refused(echoed)
    page = await a.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    script = (await a.get("/static/app.js")).text
    assert ".innerHTML =" not in script and "insertAdjacentHTML" not in script


async def test_a_message_too_large_for_one_payload_leaves_the_conversation_usable(
    stack: Stack,
) -> None:
    a, cid = stack.a, f"wedge-{RUN}"
    ok(await a.post(f"/v1/conversations/{cid}/messages", json={"content": "first"}))
    try:
        big = await a.post(
            f"/v1/conversations/{cid}/messages", json={"content": "\u00e9" * 400_000}
        )
        assert big.status_code == 413, big.text  # the client's to fix: not 503 (retry)
        assert "bytes as JSON" in refused(big, 413)
        assert ok(await a.get(f"/v1/conversations/{cid}"))["messages"][0]["content"] == "first"
        assert ok(await a.post(f"/v1/conversations/{cid}/messages", json={"content": "next"}))
        emoji = await a.post("/v1/chat/completions", json=chat("retinue", "\U0001f600" * 99_000))
        assert emoji.status_code == 413, emoji.text  # (over 1 MB as JSON: refused at once)
        assert emoji.json()["error"]["type"] == "invalid_request_error"
    finally:  # (a wedged workflow closes on DELETE)
        await a.delete(f"/v1/conversations/{cid}")


async def test_a_bad_body_is_one_line_as_on_the_service(stack: Stack) -> None:
    a = stack.a
    too_long = await a.post(f"/v1/conversations/v-{RUN}/messages",
                            json={"content": "a" * 1_000_001})  # fmt: skip
    assert "aaaa" not in refused(too_long, 422)
    odd_model = await a.post("/v1/chat/completions", json=chat("m" * 201))
    assert odd_model.status_code == 422
    assert odd_model.json()["error"]["type"] == "invalid_request_error"
