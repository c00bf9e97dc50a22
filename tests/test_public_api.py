"""The curated public API is pinned: changing it is a deliberate act."""

import retinue


def test_public_api_is_pinned() -> None:
    assert sorted(retinue.__all__) == [
        "AssistantMessage",
        "ConfigError",
        "Message",
        "Model",
        "ModelError",
        "ModelResponse",
        "RetinueError",
        "RoleError",
        "RunConfig",
        "RunOutput",
        "SubAgentError",
        "SystemMessage",
        "Tool",
        "ToolCall",
        "ToolContext",
        "ToolError",
        "ToolRegistry",
        "ToolResultMessage",
        "ToolSpec",
        "Usage",
        "UserMessage",
        "resolve_model",
        "run",
        "tool",
    ]
    for name in retinue.__all__:
        assert getattr(retinue, name) is not None


def test_every_error_derives_from_the_root() -> None:
    from retinue import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.RetinueError)
