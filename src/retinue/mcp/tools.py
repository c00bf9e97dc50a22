"""MCP tools as Retinue tools: ``mcp__<server>__<tool>``, Claude Code's names.

An allow-list entry ``mcp__<server>`` admits every tool of that server; ``mcp__<server>__x``
admits one. A role's allow-list decides which servers ever start for it: a server none of
whose tools it may use is not started. Results are mapped for a text model: text as is,
structured content as JSON (unless a text block already says it), images (PNG, JPEG, GIF,
WebP) and embedded PDFs as themselves, audio and other binaries as a short placeholder,
resources by their text or their address; an error result is an error.
A name longer than providers allow (64) is cut and given a short hash of the server's and
tool's names, so it stays unique and stable. A tool that requires task-augmented execution
(``taskSupport: "required"``) is called as an MCP task where the server offers the Tasks
extension at 2026-07-28, and left out with a notice elsewhere, as is a second tool whose
name, its odd characters replaced, is taken.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import fnmatch
import hashlib
import json
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

import mcp_types as types
import pydantic

from retinue.errors import ToolError
from retinue.events import NOTICE, emit
from retinue.llm.base import ToolSpec
from retinue.mcp.client import McpError, McpHub, McpServer
from retinue.messages import MAX_MEDIA_BYTES, MediaPart, media_part
from retinue.tools.base import Tool, ToolContext, ToolOutput, json_arguments

__all__ = ["McpSource", "McpTool", "render_result", "result_media", "server_of", "tool_name"]

log = logging.getLogger("retinue.mcp")
PREFIX = "mcp__"
MAX_RESULT = 100_000
MAX_NAME = 64  # OpenAI's limit on a function name
MAX_DESCRIPTION = 4_000  # a server's text reaches every prompt: bound it


class _AnyArgs(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, with characters providers refuse replaced by ``_``. A name
    longer than ``MAX_NAME`` is cut and ends with ``_`` and six hex digits of a hash of the
    server's and tool's own names: stable from run to run, and two tools cut to the same
    prefix keep different names."""
    name = PREFIX + server + "__" + re.sub(r"[^A-Za-z0-9_-]", "_", tool)
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:6]
    return name[: MAX_NAME - 7] + "_" + digest


def server_of(name: str) -> str | None:
    """The server a tool name or allow-list entry ``mcp__<server>[__<tool>]`` belongs to."""
    if not name.startswith(PREFIX):
        return None
    return name[len(PREFIX) :].split("__", 1)[0] or None


def admits(entries: frozenset[str], name: str) -> bool:
    """Whether an allow-list admits the MCP tool ``name`` (by name or by its server)."""
    return name in entries or f"{PREFIX}{server_of(name)}" in entries


class McpTool(Tool):
    """A tool of an MCP server; the server validates the arguments against its schema."""

    def __init__(self, server: McpServer, spec: types.Tool) -> None:
        name = tool_name(server.name, spec.name)
        description = spec.description or spec.title or f"{spec.name} (MCP server {server.name})"
        description = description[:MAX_DESCRIPTION]
        schema = dict(spec.input_schema or {"type": "object", "properties": {}})
        schema.pop("title", None)
        spec_ = ToolSpec(name, description, schema)
        super().__init__(name, description, _AnyArgs, _unused, _spec=spec_)
        self.server = server
        self.remote_name = spec.name

    async def run_call(self, ctx: ToolContext, arguments: str) -> ToolOutput:
        result = await self.server.call(self.remote_name, json_arguments(arguments))
        text = render_result(result)
        if result.is_error:
            raise ToolError(text or f"{self.name} failed (the server gave no reason)")
        return text, result_media(result)


def _unused(ctx: ToolContext, **_: Any) -> str:  # McpTool.invoke never calls its fn
    raise ToolError("an MCP tool is called through its server")


def render_result(result: types.CallToolResult) -> str:
    """A tool result as the text a model reads (bounded to ``MAX_RESULT`` characters)."""
    parts = [_block(b) for b in result.content]
    structured = result.structured_content
    if structured is not None and not any(_says(p, structured) for p in parts):
        parts.append(json.dumps(structured, ensure_ascii=False, indent=2))
    text = "\n".join(p for p in parts if p)
    if len(text) > MAX_RESULT:
        text = text[:MAX_RESULT] + f"\n[… {len(text) - MAX_RESULT} more characters cut]"
    return text


def _says(text: str, value: Any) -> bool:
    """Whether a text block already carries the structured content (as JSON, or as the
    ``{"result": ...}`` wrapper the SDKs put around a plain return value)."""
    if isinstance(value, dict) and list(value) == ["result"] and value["result"] == text:
        return True
    try:
        return json.loads(text) in (value, value.get("result") if isinstance(value, dict) else None)
    except (json.JSONDecodeError, TypeError):
        return False


def result_media(result: types.CallToolResult) -> tuple[MediaPart, ...]:
    """The images (and PDF resources) of a result that reach the model as they are."""
    found = [_media_of(b) for b in result.content]
    return tuple(p for p in found if p is not None)


def _media_of(block: Any) -> MediaPart | None:
    """An image block, or an embedded PDF, as a part; ``None`` for anything else and for one
    that is too large, corrupt or of a type no model takes (it stays a placeholder)."""
    if isinstance(block, types.ImageContent):
        data, mime = block.data, block.mime_type
    elif isinstance(block, types.EmbeddedResource) and isinstance(
        block.resource, types.BlobResourceContents
    ):
        data, mime = block.resource.blob, block.resource.mime_type or ""
    else:
        return None
    if len(data) > MAX_MEDIA_BYTES * 4 // 3 + 4:
        return None
    try:
        return media_part(base64.b64decode(data, validate=True), mime)
    except (ValueError, binascii.Error):  # MediaError is a ValueError
        return None


def _block(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if _media_of(block) is not None:
        return ""  # passed to the model as itself (result_media)
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]"
    if isinstance(block, types.ResourceLink):
        return f"[resource: {block.uri}{f' ({block.name})' if block.name else ''}]"
    if isinstance(block, types.EmbeddedResource):
        res = block.resource
        if isinstance(res, types.TextResourceContents):
            return res.text
        return f"[resource: {res.uri}, {res.mime_type or 'binary'}, not shown]"
    return f"[{getattr(block, 'type', type(block).__name__)} content, not shown]"


class McpSource:
    """The MCP tools an agent may see, listed when its run asks (see ``ToolSource``)."""

    def __init__(self, hub: McpHub) -> None:
        self.hub = hub
        self._told: set[tuple[str, str, str]] = set()

    async def tools(
        self, ctx: ToolContext, allows: Sequence[frozenset[str]], drops: frozenset[str]
    ) -> list[Tool]:
        usable = [s for n, s in self.hub.visible(ctx.role).items() if _may_use(n, allows, drops)]
        listings = await asyncio.gather(*(self._listed(ctx, s) for s in usable))  # start at once
        out: list[Tool] = []
        taken: set[str] = set()
        for server, listed in zip(usable, listings, strict=True):
            for spec in listed:
                if _needs_task(spec) and not server.tasks:
                    self._tell(ctx, server.name, f"MCP tool {spec.name!r} of server "
                               f"{server.name!r} left out: it requires task-augmented "
                               "execution (MCP Tasks), which Retinue calls only at "
                               "2026-07-28 where the server offers the Tasks extension",
                               key=spec.name)  # fmt: skip
                    continue
                t = McpTool(server, spec)
                if t.name in taken:  # two names that differ only in characters replaced
                    self._tell(ctx, server.name, f"MCP tool {spec.name!r} of server "
                               f"{server.name!r} left out: its name {t.name!r} is taken "
                               "by another tool", key=spec.name)  # fmt: skip
                    continue
                if all(admits(a, t.name) for a in allows) and not _dropped(t.name, drops):
                    taken.add(t.name)
                    out.append(t)
        return out

    async def _listed(self, ctx: ToolContext, server: McpServer) -> list[types.Tool]:
        try:
            return await server.list_tools()
        except McpError as exc:
            self._tell(ctx, server.name, str(exc))
            return []

    async def aclose(self) -> None:
        await self.hub.close()

    def _tell(self, ctx: ToolContext, server: str, text: str, *, key: str = "") -> None:
        """Say once per agent and server (and ``key``: a tool) that tools are missing, and
        why."""
        if (ctx.agent_id, server, key) in self._told:
            return
        self._told.add((ctx.agent_id, server, key))
        log.warning("%s", text)
        emit(ctx.events, NOTICE, ctx.agent_id, text=text)


def _needs_task(spec: types.Tool) -> bool:
    """Whether a tool can only be called task-augmented (``taskSupport: "required"``)."""
    execution = spec.execution
    return execution is not None and execution.task_support == "required"


def _dropped(name: str, drops: frozenset[str]) -> bool:
    """By name, or by a ``*`` pattern of a role's disallowedTools (``mcp__github__delete_*``)."""
    return name in drops or any("*" in d and fnmatch.fnmatchcase(name, d) for d in drops)


def _may_use(server: str, allows: Iterable[frozenset[str]], drops: frozenset[str]) -> bool:
    """Whether some tool of ``server`` could pass every allow-list (so it is worth starting)."""
    whole = f"{PREFIX}{server}"
    if whole in drops or f"{PREFIX}*" in drops:  # a role's disallowedTools: mcp__*
        return False
    return all(any(e == whole or e.startswith(whole + "__") for e in a) for a in allows)
