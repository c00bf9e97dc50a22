"""Bad input to the library is a one-line error and loses nothing: a wrong output type, an
oversized, corrupt or unsupported image (or a file that cannot be read) given to ``run()`` or
to a saved conversation, and a ``deps`` object that cannot be pickled in a durable run (it is
never recorded, so it is no error at all: the run, and its resume, go on)."""

from __future__ import annotations

import asyncio
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

from retinue import (
    Agent,
    ConfigError,
    ImagePart,
    MediaError,
    RetinueError,
    Role,
    RoleError,
    ToolContext,
    tool,
)
from retinue.messages import MAX_MEDIA_BYTES, UserMessage
from retinue.testing import ScriptedModel, call_tool

PNG = b"\x89PNG\r\n\x1a\n" + bytes(24)


def agent(model: ScriptedModel, tmp_path: Path, **kwargs: Any) -> Agent:
    return Agent(model, workspace=tmp_path, home=tmp_path / "home", builtin_tools=False,
                 memory=False, **kwargs)  # fmt: skip


def one_line(error: BaseException) -> str:
    text = str(error)
    assert text and "\n" not in text and "Traceback" not in text, text
    return text


@pytest.mark.parametrize("bad", [42, "Report", int, list[str], {"type": "string"}])
def test_a_wrong_output_type_is_a_one_line_error_when_the_agent_is_made(
    bad: Any, tmp_path: Path
) -> None:
    model = ScriptedModel([])
    with pytest.raises(ConfigError) as info:
        agent(model, tmp_path, output_type=bad)
    assert "output" in one_line(info.value)
    assert model.call_count == 0
    role = Role("checker", "Checks", "Check.", (), output_type=bad)  # checked at the first run
    with pytest.raises(RoleError) as role_info, agent(model, tmp_path, roles=[role]) as a:
        a.run_sync("Check it.")
    assert "role 'checker': output" in one_line(role_info.value)
    assert model.call_count == 0  # before the first model call


def bad_parts(tmp_path: Path) -> dict[str, tuple[Any, str]]:
    """What a user might pass, and a word its error must say."""
    corrupt = tmp_path / "shot.png"
    corrupt.write_bytes(b"this is not a picture")
    huge = tmp_path / "huge.png"
    huge.write_bytes(PNG + bytes(MAX_MEDIA_BYTES))
    return {
        "oversized bytes": (PNG + bytes(MAX_MEDIA_BYTES), "too large"),
        "oversized file": (huge, "too large"),
        "corrupt file": (corrupt, "unsupported media type"),
        "unsupported bytes (BMP)": (b"BM" + bytes(64), "unsupported media type"),
        "missing file": (tmp_path / "nowhere.png", "cannot read"),
        "a folder": (tmp_path, "cannot read"),
        "not a part": (3.5, "a message part must be"),
    }


@pytest.mark.parametrize(
    "case",
    ["oversized bytes", "oversized file", "corrupt file", "unsupported bytes (BMP)",
     "missing file", "a folder", "not a part"],
)  # fmt: skip
def test_bad_media_given_to_run_is_a_one_line_error_before_the_model_is_called(
    case: str, tmp_path: Path
) -> None:
    part, says = bad_parts(tmp_path)[case]
    model = ScriptedModel(["fine"])
    with agent(model, tmp_path) as a:
        with pytest.raises(MediaError) as info:
            a.run_sync(["What is in it?", part])
        assert says in one_line(info.value)
        assert isinstance(info.value, RetinueError) and model.call_count == 0
        assert a.run_sync("Still there?").content == "fine"  # the agent goes on


def test_a_corrupt_or_unsupported_part_is_refused_when_it_is_made() -> None:
    with pytest.raises(MediaError) as info:
        ImagePart("image/png", b"GIF89a" + bytes(16))  # says PNG, holds a GIF
    assert one_line(info.value) == "corrupt image: the bytes are not image/png"
    with pytest.raises(MediaError) as info:
        ImagePart("image/tiff", b"II*\x00" + bytes(16))
    assert "unsupported image media type 'image/tiff'" in one_line(info.value)
    with pytest.raises(MediaError) as info:
        ImagePart("image/png", PNG + bytes(MAX_MEDIA_BYTES))
    assert "image too large" in one_line(info.value)


def test_bad_media_in_a_saved_conversation_stores_nothing(tmp_path: Path) -> None:
    model = ScriptedModel(["Hello.", "It is a login form."])

    async def go() -> list[Any]:
        with agent(model, tmp_path) as a:
            chat = a.conversation("ticket-1")
            await chat.send("Hi.")
            with pytest.raises(MediaError):
                await chat.send(["And this?", b"BM" + bytes(64)])
            with pytest.raises(MediaError):
                await chat.send(["And this?", PNG + bytes(MAX_MEDIA_BYTES)])
            await chat.send(["What is this screenshot?", PNG])
        with agent(ScriptedModel([]), tmp_path) as again:  # as another process reads it
            return (await again.conversation("ticket-1", create=False).load()).messages

    messages = asyncio.run(go())
    users = [m for m in messages if isinstance(m, UserMessage)]
    assert [u.content for u in users] == ["Hi.", "What is this screenshot?"]
    assert [p.media_type for p in users[1].parts] == ["image/png"]
    assert model.call_count == 2  # the refused turns never reached the model
    # the model of the good turn saw the first exchange and no trace of the refused ones
    sent = [m for m in model.calls[1].messages if isinstance(m, UserMessage)]
    assert [u.content for u in sent] == ["Hi.", "What is this screenshot?"]


@tool
def balance(ctx: ToolContext[threading.Lock], account: str) -> str:
    """The balance of one account, read under the caller's lock."""
    with ctx.deps:  # a lock cannot be pickled; the tool still gets it
        return f"{account}: 42"


KEEPER = Role("keeper", "Keeps the books", "Answer from the books.", ("balance",))


def test_deps_that_cannot_be_pickled_in_a_durable_run_are_no_error(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text("durable_sessions = true\n")
    lock = threading.Lock()
    with pytest.raises(TypeError):
        pickle.dumps(lock)
    ask = {"task": "Balance of A?", "role": "keeper", "interactive": True}
    first = ScriptedModel([
        call_tool("SubAgent", ask), call_tool("balance", {"account": "A"}), "A: 42", "A has 42.",
    ])  # fmt: skip

    async def go() -> tuple[str, str]:
        with agent(first, tmp_path, tools=[balance], roles=[KEEPER]) as a:
            assert a.runtime.settings.durable_sessions  # the journal records every step
            chat = a.conversation("books", keep_sessions=True, deps=lock)
            said = (await chat.send("Ask the keeper for A's balance.")).content
        again = {"task": "And B?", "role": "keeper", "interactive": True}
        second = ScriptedModel([
            call_tool("SubAgent", again), call_tool("balance", {"account": "B"}), "B: 42",
            "B has 42 too.",
        ])  # fmt: skip
        with agent(second, tmp_path, tools=[balance], roles=[KEEPER]) as b:  # a new process
            chat = b.conversation("books", keep_sessions=True, deps=threading.Lock())
            resumed = (await chat.send("And B?")).content
            keeper_saw = [m.content for m in second.calls[1].messages if isinstance(m, UserMessage)]
            assert keeper_saw[0] == "Balance of A?"  # the kept session came back, deps anew
        return said, resumed

    said, resumed = asyncio.run(go())
    assert (said, resumed) == ("A has 42.", "B has 42 too.")
    assert first.calls[2].messages[-1].content == "A: 42"  # the tool got the lock
