"""The Claude Code tools role files ask for: LS, MultiEdit, TodoWrite, WebFetch, WebSearch.

Real files in a temporary workspace; WebFetch against a real HTTP server on 127.0.0.1 (no
other network); WebSearch with no backend and with a small in-test backend.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import pytest
from httpkit import QuietHandler, serving

from retinue.messages import ToolCall, ToolResultMessage
from retinue.subagents import RoleCatalog
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin import builtin_tools
from retinue.tools.builtin.todo import load_todos, todo_path
from retinue.tools.builtin.web import SearchHit, html_to_text, make_web_fetch, make_web_search

Call = Callable[..., Awaitable[ToolResultMessage]]
PAGE = b"""<html><head><title>Hello page</title><style>p {color: red}</style>
<script>var secret = 1;</script></head>
<body><h1>Welcome</h1><p>First   paragraph &amp; more.</p><ul><li>one</li><li>two</li></ul>
</body></html>"""


@pytest.fixture
def registry() -> ToolRegistry:
    """The built-in tools, with WebFetch allowed to reach the test server on 127.0.0.1 (the
    default refusal is tested in test_web_guard.py)."""
    return ToolRegistry(builtin_tools(web_fetch_allow_private=True))


# --- LS -----------------------------------------------------------------------------------


async def test_ls_lists_one_folder_with_marks_and_ignore(call: Call, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "a.txt").write_text("abc")
    (ws / "b.log").write_text("")
    (ws / "link").symlink_to(ws / "a.txt")
    (ws / "src" / "deep.py").write_text("x")
    result = await call("LS", path=".", ignore=["*.log"])
    assert not result.is_error, result.content
    assert result.content.splitlines() == ["./", "  a.txt  (3 bytes)", "  link@", "  src/"]
    sub = await call("LS", path=str(ws / "src"))
    assert sub.content.splitlines() == ["src/", "  deep.py  (1 bytes)"]


async def test_ls_stays_in_the_workspace(call: Call, ws: Path, outside: Path) -> None:
    escaped = await call("LS", path=str(outside))
    assert escaped.is_error and "outside the workspace" in escaped.content
    (ws / "out").symlink_to(outside)
    through_link = await call("LS", path="out")
    assert through_link.is_error and "outside the workspace" in through_link.content
    missing = await call("LS", path="nope")
    assert missing.is_error and "does not exist" in missing.content
    (ws / "f.txt").write_text("x")
    a_file = await call("LS", path="f.txt")
    assert a_file.is_error and "not a directory" in a_file.content


# --- MultiEdit ----------------------------------------------------------------------------


async def test_multi_edit_applies_edits_in_order(call: Call, ws: Path) -> None:
    (ws / "m.py").write_text("a = 1\nb = 2\nb = 3\n")
    result = await call(
        "MultiEdit",
        file_path="m.py",
        edits=[
            {"old_string": "a = 1", "new_string": "a = 10"},
            {"old_string": "b = ", "new_string": "c = ", "replace_all": True},
            {"old_string": "a = 10", "new_string": "a = 11"},  # sees the first edit's text
        ],
    )
    assert not result.is_error, result.content
    assert result.content == "Edited m.py: 3 edits, 4 replacements"
    assert (ws / "m.py").read_text() == "a = 11\nc = 2\nc = 3\n"


async def test_multi_edit_is_all_or_nothing(call: Call, ws: Path, outside: Path) -> None:
    (ws / "m.txt").write_text("one two two\n")
    failed = await call(
        "MultiEdit",
        file_path="m.txt",
        edits=[
            {"old_string": "one", "new_string": "1"},
            {"old_string": "two", "new_string": "2"},  # twice: not unique
        ],
    )
    assert failed.is_error and "edit 2" in failed.content and "2 times" in failed.content
    assert (ws / "m.txt").read_text() == "one two two\n"
    empty = await call("MultiEdit", file_path="m.txt", edits=[])
    assert empty.is_error
    escaped = await call(
        "MultiEdit",
        file_path=str(outside / "secret.txt"),
        edits=[{"old_string": "top", "new_string": "no"}],
    )
    assert escaped.is_error and (outside / "secret.txt").read_text() == "top secret\n"


# --- TodoWrite ----------------------------------------------------------------------------


async def test_todo_write_keeps_one_list_per_agent(
    call: Call, ctx: ToolContext, registry: ToolRegistry
) -> None:
    todos = [
        {"content": "Read the code", "status": "completed", "activeForm": "Reading the code"},
        {"content": "Fix the bug", "status": "in_progress"},
        {"content": "Run the tests"},
    ]
    result = await call("TodoWrite", todos=todos)
    assert not result.is_error, result.content
    assert result.content.splitlines() == [
        "Task list (1 of 3 done):",
        "[x] Read the code",
        "[~] Fix the bug",
        "[ ] Run the tests",
    ]
    saved = load_todos(ctx.data_dir, ctx.agent_id)
    assert [t.status for t in saved] == ["completed", "in_progress", "pending"]
    assert saved[0].activeForm == "Reading the code"
    other = ToolContext(agent_id="agent/../2", workspace=ctx.workspace, data_dir=ctx.data_dir)
    await registry.execute(ToolCall("c", "TodoWrite", json.dumps({"todos": []})), other)
    assert load_todos(ctx.data_dir, "agent/../2") == []
    assert todo_path(ctx.data_dir, "agent/../2").parent == ctx.data_dir / "todos"
    assert len(load_todos(ctx.data_dir, ctx.agent_id)) == 3  # the other agent's list is its own
    again = await call("TodoWrite", todos=[{"content": "Only this", "status": "completed"}])
    assert "1 of 1 done" in again.content and len(load_todos(ctx.data_dir, ctx.agent_id)) == 1
    bad = await call("TodoWrite", todos=[{"content": "x", "status": "someday"}])
    assert bad.is_error and "status" in bad.content


# --- WebFetch -----------------------------------------------------------------------------


class _Handler(QuietHandler):
    stop = threading.Event()

    def do_GET(self) -> None:
        if self.path == "/page":
            self.send_body(PAGE, "text/html; charset=utf-8")
        elif self.path == "/data.json":
            self.send_body(b'{"ok": true}', "application/json")
        elif self.path == "/big":
            self.send_body(b"x" * 300_000, "text/plain")
        elif self.path == "/image":
            self.send_body(b"\x89PNG\r\n\x1a\n\0\0", "image/png")
        elif self.path == "/moved":
            self.redirect("/page")
        elif self.path == "/slow":  # a byte at a time: no single read is slow, the whole is
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                if self.stop.wait(0.1):
                    return
                self.wfile.write(b"s")
                self.wfile.flush()
        else:
            self.send_body(b"not here", "text/plain", 404)


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.stop.clear()
    with serving(_Handler) as url:
        yield url
        _Handler.stop.set()


async def test_web_fetch_returns_html_as_text(call: Call, server: str) -> None:
    result = await call("WebFetch", url=f"{server}/page", prompt="what does it say?")
    assert not result.is_error, result.content
    head, text = result.content.split("\n\n", 1)
    assert head == f"{server}/page (HTTP 200)"
    assert text == "Hello page\nWelcome\nFirst paragraph & more.\none\ntwo"
    redirected = await call("WebFetch", url=f"{server}/moved")
    assert redirected.content.startswith(f"{server}/page (HTTP 200)")
    data = await call("WebFetch", url=f"{server}/data.json")
    assert data.content.endswith('{"ok": true}')


async def test_web_fetch_errors_say_what_happened(call: Call, server: str) -> None:
    missing = await call("WebFetch", url=f"{server}/missing")
    assert missing.is_error and "HTTP 404" in missing.content
    image = await call("WebFetch", url=f"{server}/image")
    assert image.is_error and "image/png, not text" in image.content
    for url in ("file:///etc/passwd", "ftp://127.0.0.1/x", "not a url"):
        refused = await call("WebFetch", url=url)
        assert refused.is_error and "not an http(s) URL" in refused.content


async def test_web_fetch_cuts_an_oversized_body(ctx: ToolContext, server: str) -> None:
    fetch = make_web_fetch(max_bytes=10_000, allow_private=True)
    result = await fetch.invoke(ctx, json.dumps({"url": f"{server}/big"}))
    assert "(the body was cut after 10000 bytes)" in result
    assert result.count("x") == 10_000
    default = await make_web_fetch(allow_private=True).invoke(
        ctx, json.dumps({"url": f"{server}/big"})
    )
    assert "(text cut to 100000 of 300000 characters)" in default


async def test_web_fetch_gives_up_on_a_slow_response(ctx: ToolContext, server: str) -> None:
    # the whole body takes 10 s, a byte each 0.1 s: the fetch gives up rather than read it
    registry = ToolRegistry([make_web_fetch(timeout_s=0.5, allow_private=True)])
    call = ToolCall("c", "WebFetch", json.dumps({"url": f"{server}/slow"}))
    result = await registry.execute(call, ctx)
    assert result.is_error and "took longer than 0.5 s" in result.content


async def test_web_fetch_says_when_nothing_answers(call: Call) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = await call("WebFetch", url=f"http://127.0.0.1:{port}/")
    assert result.is_error
    assert f"could not reach 127.0.0.1:{port}" in result.content
    assert "network may be unreachable" in result.content


def test_html_to_text_skips_scripts_and_keeps_blocks() -> None:
    html = "<div>a<script>x()</script>b</div><noscript>no</noscript><p>c&lt;d</p>"
    assert html_to_text(html) == "ab\nc<d"
    assert html_to_text("<p>unclosed <b>bold") == "unclosed bold"


# --- WebSearch ----------------------------------------------------------------------------


async def test_web_search_is_off_by_default_with_a_clear_error(call: Call) -> None:
    result = await call("WebSearch", query="retinue agents")
    assert result.is_error
    assert "WebSearch is not configured" in result.content
    assert "make_web_search" in result.content


class _Backend:
    def __init__(self, hits: Sequence[SearchHit]) -> None:
        self.hits = hits
        self.queries: list[tuple[str, int]] = []

    async def search(self, query: str, *, limit: int) -> Sequence[SearchHit]:
        self.queries.append((query, limit))
        return self.hits


async def test_web_search_asks_its_backend_and_filters_domains(ctx: ToolContext) -> None:
    backend = _Backend(
        [
            SearchHit("Docs", "https://docs.example.com/a", "the docs"),
            SearchHit("Blog", "https://blog.other.org/b"),
        ]
    )
    search = make_web_search(backend, limit=5)
    result = await search.invoke(ctx, json.dumps({"query": "agents"}))
    assert (
        result
        == "1. Docs\n   https://docs.example.com/a\n   the docs\n\n2. Blog\n   https://blog.other.org/b"
    )
    assert backend.queries == [("agents", 5)]
    only = await search.invoke(ctx, json.dumps({"query": "ag", "allowed_domains": ["example.com"]}))
    assert "Docs" in only and "Blog" not in only
    none = await search.invoke(
        ctx, json.dumps({"query": "ag", "blocked_domains": ["org", "example.com"]})
    )
    assert none == "(no results for 'ag')"


# --- Roles that name them -----------------------------------------------------------------


def test_roles_naming_the_claude_tools_keep_them(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "web.md").write_text(
        "---\nname: web\ndescription: Researches.\n"
        "tools: LS, MultiEdit, TodoWrite, WebFetch, WebSearch\n---\nGo.\n",
        encoding="utf-8",
    )
    catalog = RoleCatalog.load([agents])
    catalog.check_tools(t.name for t in builtin_tools())
    assert catalog.problems == []
    assert catalog.get("web").tools == ("LS", "MultiEdit", "TodoWrite", "WebFetch", "WebSearch")


# --- Registration ---------------------------------------------------------------------------

NEW = ("MultiEdit", "LS", "TodoWrite", "WebFetch", "WebSearch")


def test_builtin_tools_include_the_claude_code_tools() -> None:
    assert [t.name for t in builtin_tools()] == [
        "Read", "Write", "Edit", "MultiEdit", "LS", "Glob", "Grep", "Bash", "TodoWrite",
        "WebFetch", "WebSearch",
    ]  # fmt: skip


@pytest.mark.parametrize("small_model", [False, True])
def test_the_new_tools_give_grammars_llama_cpp_accepts(small_model: bool) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    from retinue.llm._grammar import arguments_grammar
    from retinue.llm.local import render_tools

    specs = [t.spec for t in builtin_tools() if t.name in NEW]
    for rendered in render_tools(specs, small_model=small_model):
        source = arguments_grammar(rendered["function"])
        grammar = llama_cpp.LlamaGrammar.from_string(source, verbose=False)
        assert grammar is not None, rendered["function"]["name"]
