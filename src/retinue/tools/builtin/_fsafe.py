"""Opening files below the workspace root without a check-then-use gap.

A path is first resolved to its real path (:func:`~retinue.tools.builtin.workspace.locate`);
this module then opens it one component at a time, each relative to the directory file
descriptor of the one before, with ``O_NOFOLLOW``. A folder swapped for a symlink after the
check makes the open fail (``ELOOP``) instead of leading out of the workspace.

Only regular files are opened: the type is checked before the open (``lstat``) and again on
the open descriptor (``fstat``), and the open itself is non-blocking, so a FIFO or a device
can never make a tool wait. A file with more than one hard link is refused, because its
other names may lie outside the workspace.

Standard library and :mod:`retinue.errors` only, so that it stays cheap to import and easy to
audit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

from retinue.errors import ToolError, WorkspaceError

__all__ = ["OpenMode", "check_regular", "open_dir", "open_regular", "read_head", "walk"]

OpenMode = Literal["read", "write", "create", "new"]
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFLNK: "a symbolic link",
}


def _raced(shown: str) -> WorkspaceError:
    return WorkspaceError(
        f"{shown} changed while it was being opened (a symlink appeared on the way); refused "
        "so that nothing outside the workspace is touched"
    )


def open_dir(root: Path, parts: Sequence[str], *, create: bool = False, shown: str = "") -> int:
    """A descriptor of ``root/parts...``, walked without following any symlink.

    ``create`` makes missing folders on the way. ``FileNotFoundError`` passes through when a
    folder is missing; the caller owns (and closes) the descriptor returned.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts:
            if name in ("", ".", "..") or "/" in name:
                raise WorkspaceError(f"{shown or name}: bad path component {name!r}")
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP or _is_link(name, fd):
                    raise _raced(shown or name) from None
                if exc.errno == errno.ENOTDIR:
                    raise ToolError(f"{shown or name}: {name} is not a directory") from None
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_link(name: str, dir_fd: int) -> bool:
    """Whether ``name`` is a symlink (``O_DIRECTORY | O_NOFOLLOW`` says ``ENOTDIR`` for one)."""
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def check_regular(st: os.stat_result, shown: str) -> None:
    """``ToolError`` unless ``st`` is a regular file with a single link."""
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        if kind == "a directory":
            raise ToolError(f"{shown} is a directory, not a file (use Glob to list it)")
        raise ToolError(f"{shown} is {kind}; file tools only use regular files")
    if st.st_nlink > 1:
        raise WorkspaceError(
            f"{shown} has {st.st_nlink} hard links; its other names may lie outside the "
            "workspace, so file tools refuse it (copy it to get a file of its own)"
        )


def open_regular(dir_fd: int, name: str, mode: OpenMode = "read", shown: str = "") -> int:
    """Open the regular file ``name`` in ``dir_fd`` (``O_NOFOLLOW``, never blocking).

    ``mode``: ``"read"`` / ``"write"`` an existing file (``FileNotFoundError`` when it is
    missing), ``"create"`` an existing or a new one, ``"new"`` only a new one
    (``FileExistsError`` otherwise). Nothing is truncated here: a refused file stays as it was.
    """
    shown = shown or name
    flags = _FILE_FLAGS | (os.O_RDONLY if mode == "read" else os.O_RDWR)
    try:
        check_regular(os.stat(name, dir_fd=dir_fd, follow_symlinks=False), shown)
        if mode == "new":
            raise FileExistsError(errno.EEXIST, "file exists")
    except FileNotFoundError:
        if mode in ("read", "write"):
            raise
        flags |= os.O_CREAT | os.O_EXCL
    try:
        fd = os.open(name, flags, 0o666, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _raced(shown) from None
        if exc.errno == errno.ENXIO:  # a FIFO without a reader, swapped in after the check
            raise ToolError(
                f"{shown} is a FIFO (named pipe); file tools only use regular files"
            ) from None
        raise
    try:
        check_regular(os.fstat(fd), shown)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_head(fd: int, size: int = 8192) -> bytes:
    """The first ``size`` bytes of the open file (its offset is left alone)."""
    return os.pread(fd, size, 0)


def walk(
    root: Path, parts: Sequence[str], *, skip: frozenset[str] = frozenset(), depth: int = -1
) -> Iterator[tuple[str, list[str], int]]:
    """``(folder relative to root/parts, its entry names, its descriptor)`` for every folder.

    Folders are opened relative to their parent's descriptor and never through a symlink;
    ``skip`` names folders not to enter; ``depth`` >= 0 stops that many levels down. The
    names are every non-folder entry (symlinks included: open them with
    :func:`open_regular`, which refuses them).
    """
    top = open_dir(root, parts)
    try:
        for dirpath, dirnames, names, dir_fd in os.fwalk(".", dir_fd=top):
            rel = "" if dirpath == "." else dirpath.removeprefix("./")
            level = rel.count("/") + 1 if rel else 0
            keep = depth < 0 or level < depth
            dirnames[:] = sorted(d for d in dirnames if d not in skip) if keep else []
            yield rel, sorted(names), dir_fd
    finally:
        os.close(top)
