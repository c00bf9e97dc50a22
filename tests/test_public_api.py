"""The curated public API is pinned: changing it is a deliberate act."""

import retinue


def test_public_api_is_pinned() -> None:
    assert sorted(retinue.__all__) == [
        "Agent",
        "AgentEvent",
        "AgentStream",
        "Approval",
        "ApprovalAnswered",
        "ApprovalRequest",
        "ApprovalRequested",
        "Approver",
        "AssistantMessage",
        "Compressed",
        "ConfigError",
        "Consolidated",
        "Conversation",
        "ConversationError",
        "ConversationStore",
        "DocumentPart",
        "Event",
        "EventSink",
        "FinalAnswer",
        "Guard",
        "ImagePart",
        "LimitReached",
        "MediaError",
        "Message",
        "Model",
        "ModelCallFinished",
        "ModelCallStarted",
        "ModelError",
        "ModelRequest",
        "ModelResponse",
        "ModelSettings",
        "Notice",
        "OutputValidationError",
        "PermissionMode",
        "RetinueError",
        "Role",
        "RoleError",
        "RunConfig",
        "RunFinished",
        "RunOutput",
        "RunStarted",
        "Runtime",
        "SavedConversation",
        "ScriptedModel",
        "SessionAction",
        "SessionChanged",
        "SettingSource",
        "Settings",
        "SubAgentError",
        "SubAgentOutput",
        "SystemMessage",
        "TextDelta",
        "Tool",
        "ToolCall",
        "ToolContext",
        "ToolError",
        "ToolFinished",
        "ToolRegistry",
        "ToolRequest",
        "ToolResponse",
        "ToolResult",
        "ToolResultMessage",
        "ToolSpec",
        "ToolStarted",
        "Usage",
        "UserMessage",
        "Verdict",
        "resolve_model",
        "run",
        "tool",
        "tune_for_serving",
    ]
    for name in retinue.__all__:
        assert getattr(retinue, name) is not None


def test_renamed_public_names_still_work_as_deprecated_aliases() -> None:
    import warnings

    import pytest

    renamed = {
        "ModelStarted": "ModelCallStarted",
        "ModelCalled": "ModelCallFinished",
        "SessionEvent": "SessionChanged",
    }
    for old, new in renamed.items():
        assert old not in retinue.__all__ and new in retinue.__all__
        retinue.__dict__.pop(old, None)  # (not cached by an earlier test)
        with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated: use .*\b{new}\b"):
            value = getattr(retinue, old)
        assert value is getattr(retinue, new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names do not warn
        exec("from retinue import ModelCallStarted, SessionAction, SessionChanged")


def test_the_public_names_are_the_working_ones() -> None:
    from retinue.config import Settings
    from retinue.llm.testing import ScriptedModel
    from retinue.runtime import Runtime
    from retinue.subagents.roles import Role

    assert retinue.Runtime is Runtime and retinue.Settings is Settings
    assert retinue.ScriptedModel is ScriptedModel and retinue.Role is Role
    for name in ("Agent", "AgentStream", "Role", "tool", "Runtime", "Settings", "ScriptedModel"):
        doc = getattr(retinue, name).__doc__ or ""
        assert doc and not doc.startswith(f"{name}("), f"{name} is documented"


def test_every_type_agent_takes_is_public() -> None:
    import inspect
    import re

    from retinue.agent import Agent

    stdlib = {"Sequence", "Callable", "Any", "Mapping", "Path", "None", "DepsT", "OutputT"}
    named: set[str] = set()
    for param in inspect.signature(Agent.__init__).parameters.values():
        named |= set(re.findall(r"\b[A-Z]\w+", str(param.annotation))) - stdlib
    assert {"PermissionMode", "Approver", "ModelSettings", "EventSink", "Role"} <= named
    assert {"Guard", "SettingSource"} <= named
    assert named <= set(retinue.__all__), named - set(retinue.__all__)
    assert retinue.ApprovalRequest.__name__ == "ApprovalRequest" and retinue.Approval


def test_the_package_is_typed_and_a_misspelt_name_is_not_hidden() -> None:
    from pathlib import Path

    assert (Path(retinue.__file__).parent / "py.typed").is_file()
    import pytest

    with pytest.raises(ImportError):
        exec("from retinue import Agnet")
    source = Path(retinue.__file__).read_text()
    before = source.split("    def __getattr__")[0].rstrip().splitlines()[-1]  # its block
    assert before.startswith("if not TYPE_CHECKING:"), before


def test_importing_retinue_loads_no_heavy_module() -> None:
    import subprocess
    import sys

    code = "import sys, retinue; print(sorted(m for m in sys.modules if m.startswith('retinue')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['retinue']"


def test_every_error_derives_from_the_root() -> None:
    from retinue import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.RetinueError)


def test_scripted_models_recorded_requests_are_documented_and_are_what_they_say() -> None:
    import asyncio
    import inspect

    import retinue.llm.testing
    import retinue.testing
    from retinue.messages import UserMessage

    for doc in (retinue.ScriptedModel.__doc__, retinue.testing.__doc__):
        assert doc and ".calls" in doc.replace("``calls``", ".calls") and "ModelCall" in doc
    module_doc = inspect.getdoc(retinue.llm.testing) or ""
    for name in ("model.calls", ".messages", ".tools", ".tool_names", "call_count", "assert_done"):
        assert name in module_doc, name
    model = retinue.ScriptedModel(["hi"])
    spec = retinue.ToolSpec("Echo", "echo", {"type": "object", "properties": {}})
    asyncio.run(model.complete([UserMessage("hello")], [spec]))
    [call] = model.calls
    assert isinstance(call, retinue.testing.ModelCall) and call.tool_names == ["Echo"]
    assert call.messages == (UserMessage("hello"),) and call.tools == (spec,)
