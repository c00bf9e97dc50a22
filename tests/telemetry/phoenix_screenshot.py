"""Makes ``docs/phoenix-trace.png``: a nested interactive scenario (a reviewer that asks its
parent, a background tester) exported to a running Arize Phoenix, and its trace's page.

Run: ``uv run python tests/telemetry/phoenix_screenshot.py http://127.0.0.1:6006 OUT.png``
with Phoenix serving there and Chromium at /usr/bin/chromium. Not a test.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "subagents"))
from subagent_kit import echo, make_kit  # pyright: ignore[reportMissingImports]

from retinue.engine import RunConfig
from retinue.engine.session import Session
from retinue.messages import SystemMessage
from retinue.subagents import subagent_tools
from retinue.telemetry import trace as tel
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolRegistry


async def scenario(workspace: Path) -> None:
    kit = make_kit(workspace, ("reviewer", frozenset({"ask_parent"})), "tester")
    kit.models["reviewer"].add(
        call_tool("Echo", {"text": "diff"}),
        call_tool("AskParent", {"question": "tabs or spaces?"}),
        "use spaces; 2 issues found",
    )
    kit.models["tester"].add(call_tool("Echo", {"text": "pytest"}), "tests pass")
    bg = {"role": "tester", "interactive": True, "background": True}
    main = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "review the change", "role": "reviewer",
                                   "interactive": True}),
            call_tool("SubAgent", {"task": "spaces", "role": "reviewer", "interactive": True}),
            call_tool("SubAgent", {"task": "run the tests", **bg}),
            call_tool("SubAgentStatus", {"role": "tester", "wait": True}),
            "Reviewed (2 issues) and tested (pass).",
        ],
        name="openai:gpt-4o-mini",
    )  # fmt: skip
    tools = ToolRegistry([echo, *subagent_tools()])
    config = RunConfig(main, [SystemMessage("main")], tools, kit.ctx("main"), interactive=True)
    async with kit.manager.owner("main"):
        await Session("main", config).send("review and test my change")


def screenshot(base: str, out: str) -> None:
    from playwright.sync_api import sync_playwright

    with urllib.request.urlopen(f"{base}/v1/projects") as r:
        project = json.load(r)["data"][0]["id"]
    with urllib.request.urlopen(f"{base}/v1/projects/default/spans?limit=200") as r:
        spans = json.load(r)["data"]
    trace = next(s for s in spans if s["name"] == "invoke_agent main")["context"]["trace_id"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1500, "height": 950})
        page.goto(f"{base}/projects/{project}/traces/{trace}", timeout=120_000)
        page.get_by_text("invoke_agent reviewer").first.wait_for(timeout=120_000)
        time.sleep(3)
        page.screenshot(path=out)
        browser.close()


def main() -> None:
    base, out = sys.argv[1], sys.argv[2]
    assert tel.setup(base)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp)))
    tel.disable()
    time.sleep(2)
    screenshot(base, out)


if __name__ == "__main__":
    main()
