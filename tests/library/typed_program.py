# pyright: strict
"""A program that uses the whole public API, checked by ``pyright --strict`` (test_typing.py):
the types a user sees are inferred (``assert_type``), none is ``Any`` by accident."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, assert_type

from pydantic import BaseModel

import retinue
from retinue import (
    Agent,
    AgentEvent,
    AgentStream,
    Approval,
    ApprovalRequest,
    Approver,
    AssistantMessage,
    ConfigError,
    Conversation,
    Event,
    EventSink,
    FinalAnswer,
    Guard,
    Message,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputValidationError,
    PermissionMode,
    RetinueError,
    Role,
    RoleError,
    RunConfig,
    RunOutput,
    Runtime,
    ScriptedModel,
    SessionChanged,
    Settings,
    SettingSource,
    SubAgentError,
    SubAgentOutput,
    SystemMessage,
    TextDelta,
    Tool,
    ToolCall,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolRequest,
    ToolResponse,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    Verdict,
    resolve_model,
    run,
    tool,
    tune_for_serving,
)
from retinue.testing import ModelCall, call_tool, call_tools, final_result


class Report(BaseModel):
    title: str
    score: int


@dataclass
class Deps:
    user: str


@tool
def greet(ctx: ToolContext[Deps], greeting: str) -> str:
    """Greet the run's user."""
    assert_type(ctx.deps, Deps)
    return f"{greeting}, {ctx.deps.user}"


def ask(request: ApprovalRequest) -> Approval | bool:
    return request.tool != "Bash"


def on_event(event: Event) -> None:
    print(event.kind, event.agent_id)
    match event:  # typed events: each field's type is known after the match
        case TextDelta(text=text, agent_id=who):
            assert_type(text, str)
            print(who, text)
        case SessionChanged(action="asking", question=question):
            assert_type(question, str | None)
        case _:
            pass


def text_of(event: AgentEvent) -> str:
    return event.text if event.kind == "text_delta" else ""  # the kind narrows the union


def program(workspace: Path) -> None:
    mode: PermissionMode = "default"
    approver: Approver = ask
    sink: EventSink = on_event
    settings = ModelSettings(effort="high")
    model: Model = ScriptedModel([call_tool("greet", {"greeting": "Hi"}), final_result({})])
    role = Role(name="critic", description="Scores", prompt="You score.", output_type=Report)
    agent = Agent(model, output_type=Report, deps_type=Deps, tools=[greet], roles=[role],
                  workspace=workspace, permission_mode=mode, approver=approver,
                  on_event=sink, model_settings=settings)  # fmt: skip
    out = agent.run_sync("Score it.", deps=Deps("Ada"))
    assert_type(out, RunOutput[Report])
    assert_type(out.output, Report)
    assert_type(out.content, str)
    assert_type(out.outputs(Report), list[Report])
    first: SubAgentOutput = out.subagent_outputs[0]
    print(first.role, out.output.title, out.usage.input_tokens)
    with agent.override(model=ScriptedModel(["plain"])):
        plain = Agent(ScriptedModel(["text"]), workspace=workspace).run_sync("hi")
        print(plain.content.upper())
    stream: AgentStream[Report] = agent.stream("again", deps=Deps("Bob"))
    conversation: Conversation = agent.conversation(deps=Deps("Cy"))
    runtime: Runtime = agent.runtime
    print(stream.output, conversation.messages, runtime.settings, Settings)
    agent.close()
    messages: list[Message] = [SystemMessage("s"), UserMessage("u"),
                               AssistantMessage("a", (ToolCall("1", "greet", "{}"),)),
                               ToolResultMessage("1", "greet", "ok")]  # fmt: skip
    spec: ToolSpec = greet.spec
    registry = ToolRegistry([greet])
    calls: list[ModelCall] = ScriptedModel().calls
    made: Tool = tool(lambda: "x")
    print(messages, spec, registry.names, calls, made, call_tools(("greet", {})), Usage())
    print(RunConfig, run, resolve_model, tune_for_serving, ModelResponse, retinue.__all__)
    errors: list[type[RetinueError]] = [ConfigError, ModelError, OutputValidationError,
                                        RoleError, SubAgentError, ToolError]  # fmt: skip
    print(errors)


def guarded(workspace: Path) -> None:
    """Guards, a tool that needs approval, and the settings sources, typed strictly."""

    def no_rm(call: ToolRequest) -> Verdict | None:
        assert_type(call.arguments, dict[str, Any])
        return Verdict.deny("no rm") if "rm" in str(call.arguments) else None

    async def redact(result: ToolResponse) -> Verdict[str]:
        return Verdict.rewrite(result.content.replace("secret", "[redacted]"))

    def count(request: ModelRequest) -> None:
        print(len(request.messages), request.model, request.ctx.depth)

    def review(answer: FinalAnswer) -> Verdict[str]:
        return Verdict.ask(f"release {answer.content[:20]}?")

    def big(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
        return ctx.depth > 0 or arguments.get("amount", 0) > 100

    @tool(needs_approval=big)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    sources: list[SettingSource] = ["project", "local"]
    guard = Guard(before_model=count, before_tool=no_rm, after_tool=redact, on_answer=review)
    agent = Agent(ScriptedModel(["ok"]), workspace=workspace, tools=[pay], guards=[guard],
                  setting_sources=sources)  # fmt: skip
    assert_type(agent.run_sync("pay").content, str)
    agent.close()
