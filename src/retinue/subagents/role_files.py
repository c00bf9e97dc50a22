"""Finding role files and reading their front matter, as Claude Code does and no more.

Role files are untrusted input (people copy whole collections from the internet), so:

- **Discovery** walks each role directory recursively (Claude Code reads subfolders of
  ``.claude/agents/``; a cloned collection keeps its own layout there), skips ``.git`` and
  ``node_modules``, follows directory links once (no cycles), and stops at a depth and a
  file-count limit. Every ``*.md`` file is a candidate.
- **Reading** opens a file without blocking (a FIFO named ``x.md`` is refused, not waited
  on), accepts regular files only (a link to ``/dev/zero`` is refused), reads at most
  :data:`MAX_FILE_BYTES`, and wants UTF-8.
- **Front matter** is a ``---`` line at the very top and the next line made only of dashes
  (three or more). Strict YAML first; when it fails, the retry Claude Code's parser also
  makes, once: each top-level ``key: value`` whose plain value YAML cannot take as text
  (one that holds ``": "`` or ends with ``:``, or starts with ``*``, ``&``, ``!``, ``%``,
  ``@`` or a backtick) is put in double quotes, with
  the indented lines that continue it, and the whole is parsed again. A quoted value, a
  flow list ``[a, b]`` or mapping, and a block scalar (``|``, ``>``) are left as written, so
  ``tools: [Read, Grep]`` stays a list. YAML nesting depth and alias count are bounded, so
  neither a 20,000-deep list nor an alias bomb can stop the command.

Every failure is a :class:`~retinue.errors.RoleError` naming what is wrong.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from retinue.errors import RoleError

__all__ = [
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "find_in_tree",
    "find_role_files",
    "read_role_file",
    "split_front_matter",
]

MAX_FILE_BYTES = 512 * 1024
MAX_FILES = 5000  # per directory tree
MAX_DIR_DEPTH = 8
MAX_YAML_DEPTH = 32
MAX_YAML_ALIASES = 64
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules"})
_CLOSE = re.compile(r"^-{3,}[ \t]*$")
_PLAIN_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):[ \t]+(.*\S)[ \t]*$")
_UNSAFE_START = frozenset("*&!%@`")  # YAML indicators a plain value cannot start with


def find_role_files(root: Path) -> Iterator[Path]:
    """Every ``*.md`` file under ``root`` (recursively, sorted, links to folders followed once)."""

    def pick(entry: Path) -> bool | None:  # a role file / a folder to look into / neither
        if entry.name in _SKIPPED_DIRS:
            return None
        if entry.suffix == ".md":
            return True
        return False if entry.is_dir() else None

    return find_in_tree(root, pick, max_depth=MAX_DIR_DEPTH, max_found=MAX_FILES)


def find_in_tree(
    root: Path, pick: Callable[[Path], bool | None], *, max_depth: int, max_found: int
) -> Iterator[Path]:
    """The entries under ``root`` that ``pick`` says True of, sorted, each folder's entries
    before its subfolders'; ``pick`` says False of a folder to look into (links to folders
    are followed once, no cycles), None of the rest. At most ``max_depth`` folders deep and
    ``max_found`` entries: untrusted trees are bounded."""
    seen: set[tuple[int, int]] = set()
    count = 0

    def walk(directory: Path, depth: int) -> Iterator[Path]:
        nonlocal count
        try:
            st = directory.stat()
            if (st.st_dev, st.st_ino) in seen or depth > max_depth:
                return
            seen.add((st.st_dev, st.st_ino))
            entries = sorted(directory.iterdir())
        except OSError:
            return
        subdirs = []
        for entry in entries:
            verdict = pick(entry)
            if verdict:
                count += 1
                if count > max_found:
                    return
                yield entry
            elif verdict is False:
                subdirs.append(entry)
        for sub in subdirs:
            yield from walk(sub, depth + 1)

    if root.is_dir():
        yield from walk(root, 0)


def read_role_file(path: Path) -> str:
    """The text of a role file: a regular file, at most :data:`MAX_FILE_BYTES`, UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise RoleError(f"cannot open: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RoleError("not a regular file (skipped)")
        if st.st_size > MAX_FILE_BYTES:
            raise RoleError(f"file too large ({st.st_size} bytes; at most {MAX_FILE_BYTES})")
        data = _read_at_most(fd, MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise RoleError(f"file too large (more than {MAX_FILE_BYTES} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RoleError(f"not UTF-8 text (byte {exc.start} cannot be decoded)") from None


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        try:
            chunk = os.read(fd, min(65536, limit - size))
        except OSError as exc:
            if exc.errno == errno.EAGAIN:
                raise RoleError("not a regular file (skipped)") from None
            raise RoleError(f"cannot read: {exc.strerror or exc}") from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def split_front_matter(text: str) -> tuple[dict[str, Any], list[str], str]:
    """``(front matter, notes, body)``; notes say what leniency was needed to read it."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != "---":
        raise RoleError("no front matter (a '---' line must open the file); Claude Code skips it")
    end = next((i for i in range(1, len(lines)) if _CLOSE.match(lines[i])), None)
    if end is None:
        raise RoleError("front matter is not closed (no '---' line after it)")
    head = lines[1:end]
    body = "\n".join(lines[end + 1 :]).strip()
    notes: list[str] = []
    try:
        meta = _load_yaml("\n".join(head))
    except yaml.YAMLError as exc:
        fixed, quoted = _quote_plain_values(head)
        if not quoted:
            raise RoleError(f"invalid YAML front matter: {_one_line(exc)}") from None
        try:
            meta = _load_yaml("\n".join(fixed))
        except yaml.YAMLError:
            raise RoleError(f"invalid YAML front matter: {_one_line(exc)}") from None
        keys = ", ".join(dict.fromkeys(quoted))
        notes.append(
            f"front matter is not strict YAML; read with {keys} quoted, as Claude Code does"
        )
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise RoleError("front matter must be a mapping of keys to values")
    return {str(k): v for k, v in meta.items()}, notes, body


def _quote_plain_values(lines: list[str]) -> tuple[list[str], list[str]]:
    """Claude Code's retry: ``(the lines with every top-level plain value YAML cannot read
    put in double quotes, the keys quoted)``. A value's indented continuation lines are
    folded into it (as YAML folds a plain value's lines)."""
    out: list[str] = []
    quoted: list[str] = []
    i = 0
    while i < len(lines):
        m = _PLAIN_LINE.match(lines[i])
        i += 1
        if m is None or not _needs_quotes(m.group(2)):
            out.append(lines[i - 1])
            continue
        parts = [m.group(2)]
        while i < len(lines) and lines[i][:1] in (" ", "\t") and lines[i].strip():
            parts.append(lines[i].strip())
            i += 1
        value = " ".join(parts).replace("\\", "\\\\").replace('"', '\\"')
        out.append(f'{m.group(1)}: "{value}"')
        quoted.append(m.group(1))
    return out, quoted


def _needs_quotes(value: str) -> bool:
    """Whether a plain value is one strict YAML refuses and quoting makes text."""
    first = value[0]
    if first in "\"'|>#[{":  # quoted, a block scalar, a comment, a flow list: as written
        return False
    return first in _UNSAFE_START or ": " in value or value.endswith(":")


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader with a nesting depth and an alias count limit."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                raise RoleError(f"front matter uses more than {MAX_YAML_ALIASES} YAML aliases")
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise RoleError(f"front matter is nested deeper than {MAX_YAML_DEPTH} levels")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _load_yaml(text: str) -> Any:
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise RoleError("front matter is nested too deeply") from None
    finally:
        loader.dispose()


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
