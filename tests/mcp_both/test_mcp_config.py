"""Where MCP servers are configured, role files that use them, and how results read."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types as types
import pytest
from mcp_kit import echo_def, needs_sandbox, role, trust_all

from retinue.config import Settings
from retinue.errors import ConfigError
from retinue.mcp.config import HttpServer, StdioServer, load_servers, parse_server
from retinue.mcp.servers import expanded
from retinue.mcp.tools import MAX_RESULT, render_result, server_of, tool_name
from retinue.runtime import Runtime, load_roles
from retinue.subagents.roles import Role, RoleCatalog, parse_role
from retinue.testing import ScriptedModel, call_tool


def test_mcp_json_and_config_toml_merge_with_toml_winning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKEN", "s3cret")
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "a": {"command": "a-server", "args": ["--x"], "env": {"K": "${TOKEN}"}},
        "b": {"type": "http", "url": "https://example.test/mcp",
              "headers": {"Authorization": "Bearer ${TOKEN}", "X": "${UNSET:-dflt}"}},
    }}))  # fmt: skip
    servers = load_servers(tmp_path, {"b": {"command": "b-local"}})
    # as written: ${VAR}s are expanded only when an approved server starts
    assert servers["a"] == StdioServer(command="a-server", args=["--x"], env={"K": "${TOKEN}"})
    assert expanded(servers["a"]) == StdioServer(command="a-server", args=["--x"],
                                                 env={"K": "s3cret"})  # fmt: skip
    assert servers["b"] == StdioServer(command="b-local")
    web = load_servers(tmp_path, None)["b"]
    assert isinstance(web, HttpServer) and web.headers["Authorization"] == "Bearer ${TOKEN}"
    web = expanded(web)
    assert isinstance(web, HttpServer)
    assert web.headers == {"Authorization": "Bearer s3cret", "X": "dflt"}


@pytest.mark.parametrize(
    ("name", "raw", "says"),
    [
        ("bad name", {"command": "x"}, "may only use letters"),
        ("web", {"type": "http"}, "MCP server 'web': url: Field required"),
        ("web", {"type": "ws", "url": "ws://x"}, "MCP server 'web': type"),
        ("cmd", {"command": "x", "args": "not a list"}, "MCP server 'cmd': args"),
        ("cmd", {"command": "x", "timeout": 0}, "MCP server 'cmd': timeout"),
        ("none", {}, "needs a 'command' or a 'type' and 'url'"),
        ("none", "x", "must be a table/object"),
    ],
)
def test_a_bad_definition_is_one_line_naming_the_server(name: str, raw: object, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_server(name, raw, "where")
    assert says in str(err.value) and str(err.value).startswith("where: ")
    assert "\n" not in str(err.value)


def test_config_toml_mcp_servers_are_checked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[mcp_servers.s]\ncommand = "srv"\n')
    assert Settings.load(home=home, workspace=tmp_path).mcp_servers == {"s": {"command": "srv"}}
    (home / "config.toml").write_text("[mcp_servers]\ns = 3\n")
    with pytest.raises(ConfigError, match=r"mcp_servers\.s must be a table"):
        Settings.load(home=home, workspace=tmp_path)


def test_role_mcp_servers_by_name_and_inline() -> None:
    text = (
        "---\nname: r\ndescription: d\ntools: mcp__own\nmcpServers:\n"
        "  - github\n  - own:\n      command: own-server\n---\nbody"
    )
    r = parse_role(Path("r.md"), text)
    assert r.mcp_servers == (("github", None), ("own", StdioServer(command="own-server")))
    assert "mcpServers" not in r.ignored
    with pytest.raises(Exception, match="MCP server 'x'"):
        parse_role(Path("r.md"), "---\nname: r\ndescription: d\nmcpServers: {x: 3}\n---\n")


def test_a_role_naming_only_mcp_tools_loads_when_its_servers_exist() -> None:
    only_mcp = "---\nname: {n}\ndescription: d\ntools: {t}\n{extra}---\nbody"
    roles = [
        parse_role(Path("a.md"), only_mcp.format(n="a", t="mcp__time__get_current_time", extra="")),
        parse_role(Path("b.md"), only_mcp.format(n="b", t="mcp__gone__x", extra="")),
        parse_role(
            Path("c.md"),
            only_mcp.format(n="c", t="mcp__own", extra="mcpServers: {own: {command: o}}\n"),
        ),
        parse_role(Path("d.md"), only_mcp.format(n="d", t="Read", extra="mcpServers: [nope]\n")),
    ]
    catalog = RoleCatalog.of(*roles)
    catalog.check_tools(["Read"], mcp_servers=["time"])
    assert set(catalog.roles) == {"a", "c", "d"}
    assert [str(p) for p in catalog.errors()] == [
        "b.md: no usable tool, [mcp__gone__x] are unknown here "
        "(MCP servers not configured: gone); not loaded"
    ]
    assert any("MCP server 'nope' is not configured" in p.reason for p in catalog.problems)


def test_load_roles_knows_the_configured_servers(settings: Settings, workspace: Path) -> None:
    role(workspace, "clock", "tools: mcp__time__get_current_time")
    assert "clock" in load_roles(settings).roles


@needs_sandbox
async def test_a_role_s_inline_server_is_its_own(
    settings: Settings, workspace: Path, marks: Path
) -> None:
    role(workspace, "pinger", f"mcpServers:\n  own: {json.dumps(echo_def(marks))}\ntools: mcp__own")
    trust_all(settings.home, workspace)
    offered: list[list[str]] = []

    def sub(messages, tools):
        offered.append([t.name for t in tools])
        return "pong"

    model = ScriptedModel([call_tool("SubAgent", {"task": "t", "role": "pinger"}), sub, "done"])
    rt = Runtime.create(settings, model=model, with_memory=False)
    try:
        await rt.conversation().send("go")
    finally:
        await rt.tools.close_sources()
    assert "mcp__own__echo" in offered[0] and all(n.startswith("mcp__own__") for n in offered[0])
    assert not any(n.startswith("mcp__own") for n in model.calls[0].tool_names)


def test_names_follow_claude_code() -> None:
    assert tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert tool_name("s", "a.b/c") == "mcp__s__a_b_c"
    assert server_of("mcp__github__create_issue") == "github"
    assert server_of("mcp__github") == "github"
    assert server_of("Read") is None


def test_results_read_well_for_a_text_model() -> None:
    blob = types.BlobResourceContents(uri="file:///x.bin", blob="AAAA", mime_type="app/x")
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="hello"),
            types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
            types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///b.txt", text="inside b"),
            ),
            types.EmbeddedResource(type="resource", resource=blob),
        ],
        structured_content={"n": 1},
    )
    assert render_result(result).splitlines() == [
        "hello",
        "[audio: audio/wav, 3 bytes, not shown]",
        "[resource: file:///a.txt (a)]",
        "inside b",
        "[resource: file:///x.bin, app/x, not shown]",
        "{",
        '  "n": 1',
        "}",
    ]
    big = types.CallToolResult(
        content=[types.TextContent(type="text", text="x" * (MAX_RESULT + 5))]
    )
    assert render_result(big).endswith("[… 5 more characters cut]")


async def test_a_role_defined_in_code_brings_its_servers(settings: Settings, marks: Path) -> None:
    own = parse_server("own", echo_def(marks), "code")
    coded = Role("coded", "d", "p", tools=("mcp__own__echo",), mcp_servers=(("own", own),))
    model = ScriptedModel([
        call_tool("SubAgent", {"task": "t", "role": "coded"}),
        call_tool("mcp__own__echo", {"text": "from code"}),
        "echoed",
        "done",
    ])  # fmt: skip
    rt = Runtime.create(settings, model=model, with_memory=False, roles=[coded])
    try:
        await rt.conversation().send("go")
    finally:
        await rt.tools.close_sources()
    assert model.calls[1].tool_names == ["mcp__own__echo"]
    assert model.calls[2].messages[-1].content == "echo: from code"
