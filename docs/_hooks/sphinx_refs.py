"""A griffe extension for the API reference: Retinue's docstrings are written with Sphinx
cross-reference roles (:class:`Agent`, :func:`~retinue.run`), which Markdown does not know.
Each role becomes inline code of its target (``~`` keeps the last dotted part, as in Sphinx),
linked to the API reference by an *optional* autorefs reference when its target is a full
``retinue.`` path or a name of ``retinue.__all__`` (a target the site does not document stays
plain text, without a warning), and an RST literal-block marker (a line ending in ``::``)
becomes a plain colon. The strict build neither fails on them nor prints the raw roles."""

from __future__ import annotations

import re
from typing import Any

import griffe

LITERAL = re.compile(r"(?<=\S)::$", re.MULTILINE)  # "An agent in two lines::"
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const|b):`(~?)([^`]+)`")


def _short_names() -> dict[str, str]:
    """Each name of ``retinue.__all__`` (a docstring's ``Agent``) to its full path."""
    import retinue

    return {name: f"retinue.{name}" for name in retinue.__all__}


SHORT = _short_names()


def plain(text: str) -> str:
    """``text`` with each Sphinx role as inline code of its (shortened) target, linked to
    the API reference where the site documents it; and each literal-block marker ``::`` as
    a colon."""

    def code(match: re.Match[str]) -> str:
        target = match[2].strip()
        shown = target.rsplit(".", 1)[-1] if match[1] else target
        path = target.removesuffix("()")
        anchor = path if path.startswith("retinue.") else SHORT.get(path)
        if anchor is None:
            return f"`{shown}`"
        # optional: a target the site does not document stays text, with no warning
        return f'<autoref identifier="{anchor}" optional><code>{shown}</code></autoref>'

    return LITERAL.sub(":", ROLE.sub(code, text))


class SphinxRefs(griffe.Extension):
    """Rewrites every docstring griffe loads, before mkdocstrings parses it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
