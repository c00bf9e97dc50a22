"""With durable sessions, a saved conversation's interactive sub-agent session comes back
in another process: the helper opened by the first process is asked again by the second and
sees its own earlier exchange. The first process is a real subprocess."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from retinue import Agent, Role, UserMessage
from retinue.testing import ScriptedModel, call_tool

HELPER = Role(name="helper", description="Keeps numbers", prompt="You keep numbers.", tools=())

OPENS_A_SESSION = """
    import asyncio, sys
    from retinue import Agent, Role
    from retinue.testing import ScriptedModel, call_tool

    helper = Role(name="helper", description="Keeps numbers", prompt="You keep numbers.",
                  tools=())
    ask = {"task": "Remember 42.", "role": "helper", "interactive": True}
    model = ScriptedModel([call_tool("SubAgent", ask), "Noted 42.", "The helper has it."])

    async def main():
        agent = Agent(model, roles=[helper], builtin_tools=False, memory=False,
                      home=sys.argv[1], workspace=sys.argv[2])
        conversation = agent.conversation("team", keep_sessions=True)
        print((await conversation.send("Give the helper 42.")).content, flush=True)

    asyncio.run(main())
"""


async def test_a_kept_sub_agent_session_is_there_after_the_resume(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("durable_sessions = true\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(home), "RETINUE_BLOCK_REAL_MODELS": "1"}
    first = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", textwrap.dedent(OPENS_A_SESSION), str(home),
                         str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "The helper has it."

    ask = {"task": "Which number?", "role": "helper", "interactive": True}
    model = ScriptedModel([call_tool("SubAgent", ask), "42.", "It is 42."])
    with Agent(model, roles=[HELPER], builtin_tools=False, memory=False, home=home,
               workspace=tmp_path) as agent:  # fmt: skip
        conversation = agent.conversation("team", keep_sessions=True, create=False)
        out = await conversation.send("Ask the helper.")
        assert out.content == "It is 42."
        await conversation.close()
    helper_saw = [m.content for m in model.calls[1].messages if isinstance(m, UserMessage)]
    assert "Remember 42." in helper_saw[0] and "Which number?" in helper_saw[-1]
    assert any(m.content == "Noted 42." for m in model.calls[1].messages)
