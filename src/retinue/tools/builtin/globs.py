"""One glob dialect for every path pattern: permission rules, ``Glob``, ``LS``'s ``ignore``.

A permission rule (``Read(./secrets/[ab]*)``) and the ``Glob`` tool once read the same
pattern differently (a rule took ``[`` literally, ``Glob`` as a character class), so a deny
rule could miss the very files ``Glob`` listed for its pattern. Both now translate a pattern
with :func:`glob_regex`, the syntax Claude Code's rules document (gitignore's) plus braces:

=================== ================================================================
``*``               any run of characters but ``/`` (a dot-file too); a whole
                    component (``d/*/x``) is at least one character
``?``               one character but ``/``
``[abc]`` ``[a-z]`` one character of the set; ``[!abc]`` or ``[^abc]``: one not in it;
                    never ``/``; ``]`` first in the set is a member; an unclosed ``[``
                    is a plain character
``**``              as a whole component (``a/**/b``, ``**/x``, ``x/**``): any number of
                    folders, none included; elsewhere (``a**b``) the same as ``*``
``{a,b}``           either alternative (nested too); unclosed, a plain character
``\\x``              ``x`` itself
=================== ================================================================

Where a pattern is anchored (a rule at the workspace, a bare name at any depth, a ``Glob``
below its folder) is the caller's business; only the syntax lives here. ``Grep``'s ``glob``
goes to ripgrep, whose globs read the same constructs the same way (and, as in gitignore, a
pattern without ``/`` matches a file name at any depth). Python's ``re`` only: no library
glob translator fits, because a rule's regular expression must begin with its anchor as plain
escaped text (:mod:`retinue.policy.confine` derives the sandbox's mounts from it) and must
compose with "and everything inside" for a folder.
"""

from __future__ import annotations

import re

__all__ = ["escape", "glob_regex"]

_SPECIAL = re.compile(r"([*?\[\]{}\\])")


def escape(text: str) -> str:
    """``text`` as a pattern that matches exactly it (for a path a pattern is anchored at)."""
    return _SPECIAL.sub(r"\\\1", text)


def _class(pattern: str, i: int) -> tuple[str, int] | None:
    """The character class starting at ``pattern[i] == "["``: its regex and the index after
    it, or None when it is not closed."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    j += negate
    members: list[str] = []
    first = True
    while j < len(pattern):
        c = pattern[j]
        if c == "]" and not first:
            body = "".join(members)
            return (f"[^/{body}]" if negate else f"(?!/)[{body}]"), j + 1
        if c == "\\" and j + 1 < len(pattern):
            j += 1
            c = pattern[j]
        if c == "-" and members and j + 1 < len(pattern) and pattern[j + 1] != "]":
            members.append("-")
        else:
            members.append(re.escape(c))
        first = False
        j += 1
    return None


def _braces(pattern: str, i: int) -> tuple[list[str], int] | None:
    """The alternatives of the group at ``pattern[i] == "{"`` and the index after it, or None
    when it is not closed (or has no comma)."""
    depth, start, alts = 0, i + 1, []
    j = i
    while j < len(pattern):
        c = pattern[j]
        if c == "\\":
            j += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                alts.append(pattern[start:j])
                return (alts, j + 1) if len(alts) > 1 else None
        elif c == "," and depth == 1:
            alts.append(pattern[start:j])
            start = j + 1
        j += 1
    return None


def glob_regex(pattern: str) -> str:
    """The regular expression (text, to ``fullmatch`` a ``/``-joined path) of ``pattern``."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        at_start = i == 0 or pattern[i - 1] == "/"
        if pattern.startswith("**", i) and at_start and pattern.startswith("**/", i):
            out.append("(?:(?s:.*)/)?")  # (?s: a name may hold a newline, and ** spans it)
            i += 3
        elif pattern.startswith("**", i) and at_start and i + 2 == n:
            out.append("(?s:.*)")
            i += 2
        elif c == "*":
            step = 2 if pattern.startswith("**", i) else 1
            whole = at_start and (i + step == n or pattern[i + step] == "/")
            out.append("[^/]+" if whole else "[^/]*")  # (a name is never empty)
            i += step
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (found := _class(pattern, i)) is not None:
            out.append(found[0])
            i = found[1]
        elif c == "{" and (alts := _braces(pattern, i)) is not None:
            out.append("(?:" + "|".join(glob_regex(a) for a in alts[0]) + ")")
            i = alts[1]
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)
