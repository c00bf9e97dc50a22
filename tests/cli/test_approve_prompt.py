"""The terminal approver's prompt names what "always" allows: the request's rule, or this
call only when no rule as narrow as the call exists (it printed "always ()")."""

from __future__ import annotations

import io
import os

import pytest
from rich.console import Console

from retinue.cli.approve import TerminalApprover
from retinue.policy.approvals import ApprovalRequest

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing


@pytest.mark.parametrize(
    ("rule", "shown"), [("Edit(./a.py)", "Edit(./a.py)"), ("", "this call only")]
)
async def test_the_prompt_says_what_always_allows(rule: str, shown: str) -> None:
    out = io.StringIO()
    read, write = os.pipe()
    os.write(write, b"a\n")
    request = ApprovalRequest("r1", "main", "main", 0, "Edit", "{}", "edits need a yes", rule)
    with os.fdopen(read) as stdin:
        approval = await TerminalApprover(Console(file=out, width=200), stdin=stdin)(request)
    os.close(write)
    assert approval.allow and approval.always
    assert f"[a]lways ({shown})" in out.getvalue()
