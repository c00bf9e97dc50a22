"""Native structured output: a run's ``final_result`` tool as a provider's response format.

A run with an output type offers the model a ``final_result`` tool whose parameters are the
output's JSON schema (:mod:`retinue.engine.output`). A provider that constrains its answer to
a schema *together with* function tools (OpenAI Responses: ``text.format`` of type
``json_schema`` with ``strict: true``) is asked that way instead: the tool leaves the list,
the schema becomes the format, and the model's final text is the JSON, which the run accepts
as it accepts a ``final_result`` call.

Strict mode takes a subset of JSON schema: every object lists all its properties as required
and allows no others. :func:`strict_schema` makes that of a schema when it can without
changing its meaning (it adds ``additionalProperties: false`` where nothing is said); a
schema with an optional property or open objects keeps the tool (every provider honours it).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from retinue.llm.base import ToolSpec

__all__ = ["FINAL_TOOL", "native_output", "strict_schema"]

FINAL_TOOL = "final_result"


def native_output(tools: Sequence[ToolSpec]) -> tuple[list[ToolSpec], dict[str, Any] | None]:
    """``tools`` less ``final_result``, and the ``json_schema`` format that replaces it;
    ``tools`` unchanged and ``None`` when there is no such tool or its schema cannot be
    strict."""
    final = next((t for t in tools if t.name == FINAL_TOOL), None)
    strict = strict_schema(final.parameters) if final is not None else None
    if final is None or strict is None:
        return list(tools), None
    text_format = {"type": "json_schema", "name": FINAL_TOOL, "schema": strict, "strict": True}
    return [t for t in tools if t is not final], text_format


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` as strict mode takes it, or ``None`` if that would change its meaning."""
    out = copy.deepcopy(schema)
    return out if _strict(out) else None


def _strict(node: Any) -> bool:
    if isinstance(node, list):
        return all(_strict(item) for item in node)
    if not isinstance(node, dict):
        return True
    if node.get("type") == "object" or "properties" in node:
        props = node.get("properties", {})
        if not isinstance(props, dict) or set(node.get("required", ())) != set(props):
            return False  # an optional property: strict mode would make it required
        if node.setdefault("additionalProperties", False) is not False:
            return False  # open objects are not allowed
    return all(_strict(v) for k, v in node.items() if k not in ("required", "enum", "const"))
