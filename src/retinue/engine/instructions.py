"""Project instructions: the ``CLAUDE.md`` and ``AGENTS.md`` files people keep conventions in.

Read, in this order (each one that exists, once even when two names are one file):

1. ``~/.claude/CLAUDE.md``          (the user's own, for every project)
2. ``<workspace>/CLAUDE.md``
3. ``<workspace>/.claude/CLAUDE.md``
4. ``<workspace>/AGENTS.md``

A line's ``@path`` (outside code) imports another file, as Claude Code's memory files do:
relative to the importing file, or ``~/…``; the imported text follows the importing file's.
Imports nest at most :data:`MAX_IMPORT_DEPTH` deep; a file already on the import path (a
cycle) is refused; a project file may import only files inside the workspace, the user's file
only files inside the user's home; an ``@`` word that names no file is left as text (mentions,
decorators). Files are untrusted: regular files only, UTF-8, at most :data:`MAX_FILE_CHARS`
each and :data:`MAX_TOTAL_CHARS` in all; what is cut is reported, as is every refusal.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "MAX_FILE_CHARS",
    "MAX_IMPORT_DEPTH",
    "MAX_TOTAL_CHARS",
    "Instructions",
    "instruction_files",
    "load_instructions",
]

MAX_IMPORT_DEPTH = 5
MAX_FILE_CHARS = 20_000
MAX_TOTAL_CHARS = 40_000
MAX_IMPORTS = 50
_IMPORT = re.compile(r"(?<![\w@`/])@((?:~/|\.{1,2}/|/)?[\w.-]+(?:/[\w.-]+)*)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`]*`")


@dataclass(slots=True)
class Instructions:
    """The text for the system prompt, the files it came from, and what went wrong."""

    text: str = ""
    files: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def section(self) -> str:
        """The system prompt's section ('' when there is nothing)."""
        if not self.text:
            return ""
        return (
            "## Project instructions\n"
            "From the user's and the project's CLAUDE.md / AGENTS.md files; follow them.\n\n"
            + self.text
        )


def instruction_files(workspace: Path, user_home: Path | None = None) -> list[tuple[Path, Path]]:
    """``(file, the root its imports must stay inside)``, in reading order."""
    home = user_home or Path.home()
    return [
        (home / ".claude" / "CLAUDE.md", home),
        (workspace / "CLAUDE.md", workspace),
        (workspace / ".claude" / "CLAUDE.md", workspace),
        (workspace / "AGENTS.md", workspace),
    ]


def load_instructions(workspace: Path, user_home: Path | None = None) -> Instructions:
    """Every instruction file that exists, with its imports (see the module docstring)."""
    loader = _Loader(Path(os.path.realpath(user_home or Path.home())))
    for path, root in instruction_files(workspace, user_home):
        if os.path.lexists(path):
            loader.add(path, Path(os.path.realpath(root)), depth=0, chain=())
    return loader.result()


class _Loader:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.out = Instructions()
        self.blocks: list[str] = []
        self.seen: set[Path] = set()
        self.size = 0
        self.imports = 0

    def result(self) -> Instructions:
        self.out.text = "\n\n".join(self.blocks)
        return self.out

    def add(self, path: Path, root: Path, *, depth: int, chain: tuple[Path, ...]) -> None:
        real = Path(os.path.realpath(path))
        if real in chain:
            via = " -> ".join(p.name for p in (*chain, real))
            self.out.problems.append(f"{path}: import cycle refused ({via})")
            return
        if real in self.seen:
            return  # read once (CLAUDE.md linked to AGENTS.md, or imported twice)
        if not real.is_relative_to(root):
            self.out.problems.append(f"{path}: outside {root}; not read")
            return
        text = self._read(real)
        if text is None:
            return
        self.seen.add(real)
        self.out.files.append(real)
        if len(text) > MAX_FILE_CHARS:
            self.out.problems.append(f"{real}: cut to its first {MAX_FILE_CHARS} characters")
            text = text[:MAX_FILE_CHARS]
        room = MAX_TOTAL_CHARS - self.size
        if room <= 0:
            self.out.problems.append(f"{real}: left out (instructions exceed {MAX_TOTAL_CHARS})")
            return
        if len(text) > room:
            self.out.problems.append(
                f"{real}: cut to {room} characters (instructions exceed {MAX_TOTAL_CHARS})"
            )
            text = text[:room]
        self.size += len(text)
        self.blocks.append(f"<!-- {real} -->\n{text.strip()}")
        for target in _imports(text):
            self._import(real, target, root, depth=depth + 1, chain=(*chain, real))

    def _import(
        self, source: Path, target: str, root: Path, *, depth: int, chain: tuple[Path, ...]
    ) -> None:
        home = target.startswith("~/")
        path = self.home / target[2:] if home else source.parent / target
        if not os.path.lexists(path) or os.path.isdir(path):
            return  # an @word that names no file: text
        if depth > MAX_IMPORT_DEPTH:
            self.out.problems.append(
                f"{source}: import of {target} refused (imports nest at most "
                f"{MAX_IMPORT_DEPTH} deep)"
            )
            return
        self.imports += 1
        if self.imports > MAX_IMPORTS:
            if self.imports == MAX_IMPORTS + 1:
                self.out.problems.append(
                    f"{source}: more than {MAX_IMPORTS} imports; rest left out"
                )
            return
        self.add(path, root, depth=depth, chain=chain)

    def _read(self, path: Path) -> str | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            self.out.problems.append(f"{path}: cannot open ({exc.strerror or exc})")
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                self.out.problems.append(f"{path}: not a regular file; not read")
                return None
            data = b""
            while len(data) < MAX_FILE_CHARS * 4 + 4 and (chunk := os.read(fd, 65536)):
                data += chunk
        except OSError as exc:
            self.out.problems.append(f"{path}: cannot read ({exc.strerror or exc})")
            return None
        finally:
            os.close(fd)
        text = data.decode("utf-8", errors="replace")
        if "\0" in text:
            self.out.problems.append(f"{path}: binary, not text; not read")
            return None
        return text


def _imports(text: str) -> list[str]:
    """The ``@path`` words of ``text``, outside fenced code and code spans, in order."""
    found: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for m in _IMPORT.finditer(_CODE_SPAN.sub("", line)):
            target = m.group(1).rstrip(".")
            if target and target not in found:
                found.append(target)
    return found
