"""What the black-box security tests share: running as ``nobody`` as well as the test's user.

Root matters to the sandbox (bubblewrap kept root's capabilities), so each test that starts
``retinue`` runs once as the test's user and, when that is root and ``setpriv`` can drop to
``nobody`` with Retinue still importable, once more as ``nobody`` (:data:`USERS`).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

import pytest

__all__ = ["NOBODY", "USERS", "as_nobody_works", "as_user"]

NOBODY = 65534


def as_user(argv: list[str], uid: int | None) -> list[str]:
    """``argv`` run as ``uid`` (``None``: as the test's own user)."""
    if uid is None:
        return argv
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]


@functools.cache
def as_nobody_works() -> bool:
    """Whether this machine can run Retinue as ``nobody`` (root, ``setpriv``)."""
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        return False
    probe = as_user([sys.executable, "-c", "import retinue"], NOBODY)
    return subprocess.run(probe, capture_output=True, timeout=60, check=False).returncode == 0


USERS = [
    pytest.param(None, id="as-self"),
    pytest.param(NOBODY, id="as-nobody", marks=pytest.mark.skipif(
        not as_nobody_works(), reason="needs root and setpriv to run as nobody")),
]  # fmt: skip
