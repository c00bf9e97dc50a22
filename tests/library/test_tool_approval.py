"""The program's own tools put to the approver: ``@tool(needs_approval=True)`` asks before every
call, a check ``(ctx, arguments) -> bool`` (sync or async) before the calls it picks, in every
permission mode and at every depth; nobody to answer means a refusal the model can read."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue import Agent, Approval, ApprovalRequest, Role, ToolContext, ToolResultMessage, tool
from retinue.testing import ScriptedModel, call_tool

paid: list[int] = []


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    paid.append(amount)
    return f"paid {amount}"


def over_100(ctx: ToolContext, arguments: dict[str, object]) -> bool:
    amount = arguments["amount"]
    return not isinstance(amount, int) or amount > 100


@tool("refund", needs_approval=over_100)
def refund(amount: int) -> str:
    """Refund an amount."""
    paid.append(-amount)
    return f"refunded {amount}"


async def main_agent_only(ctx: ToolContext, arguments: dict[str, object]) -> bool:
    return ctx.depth == 0


@tool(needs_approval=main_agent_only)
def note(text: str) -> str:
    """Keep a note."""
    return "kept"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    paid.clear()


class Answers:
    """An approver that answers from a list and keeps what it was asked."""

    def __init__(self, *answers: bool | Approval) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> bool | Approval:
        self.asked.append(request)
        return self.answers.pop(0)


def agent(model: ScriptedModel, tmp_path: Path, **kw: object) -> Agent:
    return Agent(model, workspace=tmp_path, home=tmp_path / "home", tools=[pay, refund, note],
                 builtin_tools=False, memory=False, **kw)  # type: ignore[arg-type]  # fmt: skip


def results(model: ScriptedModel) -> list[str]:
    return [m.content for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]


def test_a_tool_that_needs_approval_asks_and_runs_only_on_a_yes(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool("pay", {"amount": 5}), call_tool("pay", {"amount": 7}),
                           "done"])  # fmt: skip
    approver = Answers(True, Approval(False, message="too much today"))
    out = agent(model, tmp_path, approver=approver).run_sync("pay twice")
    assert out.content == "done" and paid == [5]
    assert [(r.tool, r.depth) for r in approver.asked] == [("pay", 0), ("pay", 0)]
    assert (
        approver.asked[0].reason == "pay needs approval"
        and '"amount": 5' in approver.asked[0].arguments
    )
    assert results(model)[1].startswith("Error: permission denied")
    assert "too much today" in results(model)[1]


def test_asks_in_every_mode_and_without_an_approver_is_refused(tmp_path: Path) -> None:
    approver = Answers(True)
    model = ScriptedModel([call_tool("pay", {"amount": 1}), "ok"])
    agent(model, tmp_path, approver=approver, permission_mode="bypassPermissions").run_sync("pay")
    assert paid == [1] and len(approver.asked) == 1  # bypass mode still asks

    model = ScriptedModel([call_tool("pay", {"amount": 2}), "ok"])
    agent(model, tmp_path).run_sync("pay")  # a library agent with nobody to answer
    [said] = results(model)
    assert paid == [1] and "nobody is here to approve it" in said and "pay needs approval" in said

    model = ScriptedModel([call_tool("pay", {"amount": 3}), "ok"])
    agent(model, tmp_path, approver=Answers(), permission_mode="dontAsk").run_sync("pay")
    assert paid == [1] and "dontAsk" in results(model)[0]


def test_a_check_decides_which_calls_ask(tmp_path: Path) -> None:
    approver = Answers(False)
    model = ScriptedModel([call_tool("refund", {"amount": 50}),
                           call_tool("refund", {"amount": 500}), "done"])  # fmt: skip
    agent(model, tmp_path, approver=approver).run_sync("refund")
    assert paid == [-50] and [r.arguments for r in approver.asked] == ['{"amount": 500}']


def test_always_lifts_the_question_for_the_rest_of_the_session(tmp_path: Path) -> None:
    approver = Answers(Approval(True, always=True))
    model = ScriptedModel([call_tool("pay", {"amount": 1}), call_tool("pay", {"amount": 1}),
                           "done"])  # fmt: skip
    agent(model, tmp_path, approver=approver).run_sync("pay")
    assert paid == [1, 1] and len(approver.asked) == 1


def test_a_sub_agent_asks_the_same_approver_and_an_async_check_sees_its_depth(
    tmp_path: Path,
) -> None:
    role = Role(name="clerk", description="Pays", prompt="You pay.", tools=("pay", "note"))
    steps = [
        call_tool("SubAgent", {"task": "pay 9", "role": "clerk"}),
        call_tool("note", {"text": "sub-agent: not asked"}),
        call_tool("pay", {"amount": 9}),
        "paid 9",
        call_tool("note", {"text": "main agent: asked"}),
        "all paid",
    ]
    approver = Answers(True, True)
    model = ScriptedModel(steps)
    out = agent(model, tmp_path, approver=approver, roles=[role]).run_sync("pay 9")
    assert out.content == "all paid" and paid == [9]
    assert [(r.tool, r.depth, r.role) for r in approver.asked] == [
        ("pay", 1, "clerk"),
        ("note", 0, "main"),
    ]


def test_a_check_that_raises_is_an_error_result_not_a_crash(tmp_path: Path) -> None:
    def broken(ctx: ToolContext, arguments: dict[str, object]) -> bool:
        raise RuntimeError("no ledger")

    @tool(needs_approval=broken)
    def transfer(amount: int) -> str:
        """Transfer."""
        paid.append(amount)
        return "moved"

    model = ScriptedModel([call_tool("transfer", {"amount": 1}), "carried on"])
    a = Agent(model, workspace=tmp_path, home=tmp_path / "home", tools=[transfer],
              builtin_tools=False, memory=False, approver=Answers(True))  # fmt: skip
    assert a.run_sync("go").content == "carried on" and paid == []
    [said] = results(model)
    assert "needs_approval check of transfer failed: RuntimeError: no ledger" in said


def test_needs_approval_must_be_a_bool_or_a_function() -> None:
    with pytest.raises(TypeError, match="needs_approval"):
        tool(needs_approval="yes")(lambda: "x")  # type: ignore[arg-type]
    assert pay.needs_approval is True and refund.needs_approval is over_100
    assert tool(lambda: "x").needs_approval is False  # type: ignore[arg-type]
