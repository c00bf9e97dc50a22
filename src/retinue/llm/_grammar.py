"""The grammar that constrains the embedded model to an answer or a valid tool call.

Decoding follows a GBNF grammar (llama.cpp's grammar format), so the model's output is either

* an answer: free text that starts with a visible character (so it is never empty) other than
  ``{`` or a ```` ```json ```` fence, and opens no tag (no ``<t`` anywhere, so no stray
  ``<tool_call>``); or
* one or more calls, ``{"name": N, "arguments": A}`` where ``N`` is one of the offered tools
  and ``A`` matches that tool's JSON schema, each in the model's own ``<tool_call>`` tags, or
  bare, or in a ```` ```json ```` fence: a small model that starts to write JSON is steered
  into a valid call instead of an answer that merely looks like one.

A hallucinated tool name or malformed arguments therefore cannot be generated. The JSON part is
converted by llama-cpp-python's JSON-schema converter; references (``$ref`` to ``$defs``) are
inlined first, and a tool whose schema the converter refuses keeps a constrained name with
free-form object arguments.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["tool_call_grammar"]

_MAX_REF_DEPTH = 8
_ANNOTATIONS = frozenset({"$defs", "title", "description", "examples", "default"})

_FRAME = r"""
root ::= rt-answer | rt-calls
rt-answer ::= rt-first rt-char*
rt-first ::= [^<{`\x00 \t\r\n] | "`" [^`\x00] | "``" [^`\x00] | "```" [^j`\x00]
rt-char ::= [^<\x00] | "<" [^t\x00]
rt-calls ::= rt-call ("\n" rt-call)*
rt-call ::= rt-tagged | rt-call-json | rt-fenced
rt-tagged ::= "<tool_call>\n" rt-call-json "\n</tool_call>"
rt-fenced ::= "```json\n" rt-call-json "\n```"
"""


def tool_call_grammar(tools: list[dict[str, Any]]) -> str:
    """GBNF for "an answer, or calls to these tools" (tools in OpenAI function form)."""
    from llama_cpp.llama_grammar import (  # pyright: ignore[reportMissingImports]
        json_schema_to_gbnf,
    )

    alternatives = [_call_schema(t["function"]) for t in tools]
    schema = {"oneOf": alternatives} if len(alternatives) > 1 else alternatives[0]
    try:
        body = json_schema_to_gbnf(json.dumps(schema), prop_order=["name", "arguments"])
    except Exception:  # the converter rejects some schemas: fall back to free-form arguments
        loose = [_call_schema(t["function"], loose=True) for t in tools]
        schema = {"oneOf": loose} if len(loose) > 1 else loose[0]
        body = json_schema_to_gbnf(json.dumps(schema), prop_order=["name", "arguments"])
    lines = []
    for line in body.splitlines():
        if line.startswith("root ::= "):
            line = "rt-call-json ::= " + line.removeprefix("root ::= ")
        lines.append(line)
    return _FRAME.strip() + "\n" + "\n".join(lines) + "\n"


def _call_schema(function: dict[str, Any], *, loose: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = function.get("parameters") or {"type": "object"}
    defs = params.get("$defs")
    defs = defs if isinstance(defs, dict) else {}
    arguments = {"type": "object"} if loose else _inline(params, defs, 0)
    return {
        "type": "object",
        "properties": {"name": {"const": function["name"]}, "arguments": arguments},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def _inline(node: Any, defs: dict[str, Any], depth: int) -> Any:
    """``node`` with local ``#/$defs/...`` references replaced by their definitions."""
    if isinstance(node, list):
        return [_inline(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if target is None or depth >= _MAX_REF_DEPTH:
            return {}  # unknown or too deep (recursive): any JSON value
        return _inline(target, defs, depth + 1)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _ANNOTATIONS:
            continue
        if key in ("properties", "patternProperties") and isinstance(value, dict):
            out[key] = {name: _inline(sub, defs, depth) for name, sub in value.items()}
        else:
            out[key] = _inline(value, defs, depth)
    return out
