"""A griffe extension for the API reference: Retinue's docstrings are written with Sphinx
cross-reference roles (:class:`Agent`, :func:`~retinue.run`), which Markdown does not know.
Each role becomes inline code of its target (``~`` keeps the last dotted part, as in Sphinx),
and an RST literal-block marker (a line ending in ``::``) becomes a plain colon, so that the
strict build neither fails on them nor prints the raw role text."""

from __future__ import annotations

import re
from typing import Any

import griffe

LITERAL = re.compile(r"(?<=\S)::$", re.MULTILINE)  # "An agent in two lines::"
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const|b):`(~?)([^`]+)`")


def plain(text: str) -> str:
    """``text`` with each Sphinx role as inline code of its (shortened) target, and each
    literal-block marker ``::`` as a colon."""

    def code(match: re.Match[str]) -> str:
        target = match[2].strip()
        if match[1]:
            target = target.rsplit(".", 1)[-1]
        return f"`{target}`"

    return LITERAL.sub(":", ROLE.sub(code, text))


class SphinxRefs(griffe.Extension):
    """Rewrites every docstring griffe loads, before mkdocstrings parses it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
