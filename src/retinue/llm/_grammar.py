"""Grammars that hold the embedded model to a choice it can make well (llama.cpp GBNF).

A small model picks tools badly when it must write a whole call at once: it answers in JSON
that only looks like a call, or invents a tool. So a constrained reply is made in two steps
(see :mod:`retinue.llm._local_engine`), each decoded under one of these grammars:

1. :func:`choice_grammar` - one word: ``answer``, or the name of an offered tool;
2. for a tool with optional parameters, :func:`option_grammar` - one word: :data:`NO_OPTION`,
   or the one optional parameter the call is to give;
3. either :data:`ANSWER_GRAMMAR` - free text that starts with a visible character (so it is
   never empty) other than ``{`` or a code fence, and opens no tag (no ``<t``, so no stray
   ``<tool_call>``) - or :func:`arguments_grammar` - that tool's arguments, matching its JSON
   schema, closing the ``<tool_call>`` whose start the engine wrote itself. Its optional
   parameters are left out, but for the one named in step 2: a small model otherwise fills
   every property it is shown, with whatever text it has just read.

The model's native format (``tool_format="native"``, see :mod:`retinue.llm.profiles`) decodes
freely until the model itself opens a ``<tool_call>``; then :func:`call_name_grammar` holds it to
an offered tool's name and :func:`arguments_grammar` (every optional parameter left optional) to
that tool's arguments and the call's end.

A hallucinated tool name or malformed arguments therefore cannot be generated. The JSON part is
converted by llama-cpp-python's JSON-schema converter; references (``$ref`` to ``$defs``) are
inlined first, and a schema the converter refuses falls back to free-form object arguments.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "ANSWER",
    "ANSWER_GRAMMAR",
    "NO_OPTION",
    "arguments_grammar",
    "call_name_grammar",
    "call_prefix",
    "choice_grammar",
    "option_grammar",
    "optional_parameters",
]

ANSWER = "answer"
"""The choice that means "reply in text, no tool"."""
NO_OPTION = "none"
"""The choice that means "no optional argument"; listed first, so it is the default."""

_MAX_REF_DEPTH = 8
_ANNOTATIONS = frozenset({"$defs", "title", "description", "examples", "default"})
_COUNTS = frozenset({"minLength", "maxLength", "minItems", "maxItems"})
_MAX_COUNT = 16
"""Length and item bounds above this are left to the tool's own validation: the converter
spells a bound out as that many nested optional rules, and llama.cpp refuses a grammar with
too many (a URL's ``maxLength`` of 2,048 made WebFetch's grammar unusable)."""

ANSWER_GRAMMAR = r"""
root ::= rt-first rt-char*
rt-first ::= [^<{`\x00 \t\r\n] | "`" [^`\x00] | "``" [^`\x00] | "```" [^j`\x00]
rt-char ::= [^<\x00] | "<" [^t\x00]
""".strip()


def choice_grammar(names: list[str]) -> str:
    """One word: :data:`ANSWER` or one of ``names``."""
    words = " | ".join(_literal(n) for n in [ANSWER, *names])
    return f"root ::= {words}"


def option_grammar(names: list[str]) -> str:
    """One word: :data:`NO_OPTION` or one of the optional parameters ``names``."""
    words = " | ".join(_literal(n) for n in [NO_OPTION, *names])
    return f"root ::= {words}"


def optional_parameters(function: dict[str, Any]) -> list[str]:
    """The names of ``function``'s optional parameters, in the schema's order."""
    params = function.get("parameters") or {}
    props = params.get("properties")
    if not isinstance(props, dict):
        return []
    required = params.get("required") or []
    return [name for name in props if name not in required]


def call_name_grammar(names: list[str]) -> str:
    """The start of a call's JSON after ``<tool_call>\n``: one of ``names``, up to where its
    arguments begin (the same text :func:`call_prefix` writes after the tag)."""
    quoted = " | ".join(_literal(json.dumps(n, ensure_ascii=False)) for n in names)
    return f'root ::= "{{\\"name\\": " ({quoted}) ", \\"arguments\\": "'


def call_prefix(name: str) -> str:
    """The start of a call in the model's own format, up to where its arguments begin."""
    return f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": '


def arguments_grammar(function: dict[str, Any], given: tuple[str, ...] | None = None) -> str:
    """The arguments of a call to ``function`` (OpenAI function form) and the call's end.

    The required parameters come first, in the schema's order. ``given``: the optional
    top-level parameters the call gives (then required too); the others cannot be written.
    ``None`` leaves every optional one optional: the object may close after the required ones.
    """
    from llama_cpp.llama_grammar import (  # pyright: ignore[reportMissingImports]
        json_schema_to_gbnf,
    )

    params: dict[str, Any] = function.get("parameters") or {"type": "object"}
    defs = params.get("$defs")
    schema = _inline(params, defs if isinstance(defs, dict) else {}, 0)
    if given is not None:
        schema = _only(schema, given)
    try:
        body = json_schema_to_gbnf(json.dumps(schema))
    except Exception:  # the converter rejects some schemas: any JSON object will do
        body = json_schema_to_gbnf(json.dumps({"type": "object"}))
    lines = [r'root ::= rt-args "}\n</tool_call>"']
    for line in body.splitlines():
        if line.startswith("root ::= "):
            line = "rt-args ::= " + line.removeprefix("root ::= ")
        lines.append(line)
    return "\n".join(lines)


def _only(schema: dict[str, Any], given: tuple[str, ...]) -> dict[str, Any]:
    """``schema`` with its optional properties other than ``given`` removed, ``given`` required."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return schema
    required = [n for n in schema.get("required") or [] if n in props]
    keep = [*required, *(n for n in props if n in given and n not in required)]
    out = {**schema, "properties": {n: props[n] for n in keep}, "required": keep}
    if not keep:
        out.pop("required")
    return out


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a valid GBNF literal for a tool name


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
        if key in _ANNOTATIONS or (
            key in _COUNTS and isinstance(value, int) and value > _MAX_COUNT
        ):
            continue
        if key in ("properties", "patternProperties") and isinstance(value, dict):
            out[key] = {name: _inline(sub, defs, depth) for name, sub in value.items()}
        else:
            out[key] = _inline(value, defs, depth)
    return out
