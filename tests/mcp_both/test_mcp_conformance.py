"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, a client this
project did not write) against ``retinue mcp serve --http``, a real process behind its real
bearer-token authentication.

The suite's client cannot send a header, so it reaches the server through a loopback proxy
that adds the token (:mod:`bearer_proxy`); the server's authentication is unchanged. The
suite runs twice, once per revision's requirement set, each at its own wire: 2025-11-25
(``initialize``, sessions) and 2026-07-28 (stateless, ``_meta`` on every request).

Most of the suite's scenarios call the fixture tools, prompts and resources of the suite's
own reference server (``test_simple_text``, ``test_simple_prompt``, ``test://static-text``,
...), which a server with other tools cannot have: :data:`NOT_APPLICABLE` names them and
why; some of them "pass" against Retinue only because the suite accepts the error result of
an unknown tool, and are not counted. Every check of every other scenario must pass, except
the few single checks in :data:`FIXTURE_CHECKS` that need a fixture tool inside a scenario
that otherwise applies (Retinue offers the Tasks extension for ``SubAgent``, so the
Tasks scenario of capability negotiation applies; the other Tasks scenarios drive the
suite's fixture tools). A scenario that a later version of the suite adds is judged like
the others until :data:`NOT_APPLICABLE` says why it does not apply.

Skips without ``tests/mcp_both/conformance/node_modules`` (``cd tests/mcp_both/conformance
&& npm ci``: it brings the suite and the Node 22 it needs, both from the npm registry)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path

import httpx
import pytest
from bearer_proxy import bearer_proxy, free_port
from test_mcp_cli import env_for

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel

HERE = Path(__file__).with_name("conformance")
NODE = HERE / "node_modules" / "node" / "bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
REVISIONS = ("2025-11-25", "2026-07-28")

pytestmark = [
    pytest.mark.timeout(400),
    pytest.mark.skipif(
        not (NODE.is_file() and SUITE.is_file()),
        reason="needs tests/mcp_both/conformance/node_modules "
        "(cd tests/mcp_both/conformance && npm ci: the suite and Node 22)",
    ),
]

_FIXTURE_TOOL = "calls the suite's fixture tool {} (none on a server with other tools)"
NOT_APPLICABLE: dict[str, str] = {
    "tools-call-simple-text": _FIXTURE_TOOL.format("test_simple_text"),
    "tools-call-image": _FIXTURE_TOOL.format("test_image_content"),
    "tools-call-audio": _FIXTURE_TOOL.format("test_audio_content"),
    "tools-call-embedded-resource": _FIXTURE_TOOL.format("test_embedded_resource"),
    "tools-call-mixed-content": _FIXTURE_TOOL.format("test_multiple_content_types"),
    "tools-call-error": _FIXTURE_TOOL.format("test_error_handling"),
    "tools-call-with-progress": _FIXTURE_TOOL.format("test_tool_with_progress"),
    "tools-call-with-logging": _FIXTURE_TOOL.format("test_tool_with_logging"),
    "tools-call-sampling": _FIXTURE_TOOL.format("test_sampling"),
    "tools-call-elicitation": _FIXTURE_TOOL.format("test_elicitation"),
    "elicitation-sep1034-defaults": _FIXTURE_TOOL.format("test_elicitation_sep1034_defaults"),
    "elicitation-sep1330-enums": _FIXTURE_TOOL.format("test_elicitation_sep1330_enums"),
    "json-schema-2020-12": _FIXTURE_TOOL.format("json_schema_2020_12_tool"),
    "server-sse-polling": _FIXTURE_TOOL.format("test_reconnection"),
    "resources-read-text": "reads the suite's fixture resource test://static-text",
    "resources-read-binary": "reads the suite's fixture resource test://static-binary",
    "resources-templates-read": "reads the suite's fixture template test://template/{id}/data",
    "resources-subscribe": "resources/subscribe of the suite's fixture resources; Retinue's one "
    "resource never changes (it declares no subscriptions at 2025-11-25; at 2026-07-28 the SDK "
    "declares resources.subscribe for its subscriptions/listen stream)",
    "resources-unsubscribe": "resources/unsubscribe: as resources-subscribe",
    "prompts-get-simple": "gets the suite's fixture prompt test_simple_prompt (Retinue has none)",
    "prompts-get-with-args": "gets the fixture prompt test_prompt_with_arguments",
    "prompts-get-embedded-resource": "gets the fixture prompt test_prompt_with_embedded_resource",
    "prompts-get-with-image": "gets the fixture prompt test_prompt_with_image",
    "completion-complete": "completion/complete: Retinue offers no prompts or templates to "
    "complete, it does not declare completions",
    "logging-set-level": "logging/setLevel: Retinue does not declare logging (deprecated at "
    "2026-07-28)",
    "http-custom-header-server-validation": "needs a tool with x-mcp-header parameters (SEP-2243); "
    "Retinue's have none",
    **{
        f"input-required-result-{name}": _FIXTURE_TOOL.format(f"test_input_required_result_{tool}")
        for name, tool in [
            ("basic-elicitation", "elicitation"),
            ("basic-sampling", "sampling"),
            ("basic-list-roots", "list_roots"),
            ("request-state", "request_state"),
            ("multiple-input-requests", "multiple_inputs"),
            ("multi-round", "multi_round"),
            ("missing-input-response", "elicitation"),
            ("result-type", "elicitation"),
            ("tampered-state", "tampered_state"),
            ("capability-check", "capabilities"),
            ("ignore-extra-params", "elicitation"),
            ("validate-input", "elicitation"),
        ]
    },
    "input-required-result-non-tool-request": "gets the fixture prompt "
    "test_input_required_result_prompt",
    **{
        f"tasks-{name}": "the Tasks extension's fixture tools (slow_compute, failing_job, "
        "confirm_delete, ...)"
        for name in [
            "lifecycle",
            "wire-fields",
            "request-state-removal",
            "mrtr-input",
            "request-headers",
            "dispatch-and-envelope",
            "status-notifications",
            "required-task-error",
            "mrtr-composition",
        ]
    },
}

FIXTURE_CHECKS: dict[tuple[str, str], str] = {
    ("server-stateless", "sep-2575-server-rejects-undeclared-capability"):
        _FIXTURE_TOOL.format("test_missing_capability"),
    ("server-stateless", "sep-2575-missing-capability-http-400"):
        _FIXTURE_TOOL.format("test_missing_capability"),
    ("tasks-capability-negotiation", "tasks-per-request-meta-opt-in"):
        _FIXTURE_TOOL.format("slow_compute"),
}  # fmt: skip

PASSING = {"SUCCESS", "WARNING", "INFO", "SKIPPED"}  # a WARNING is a SHOULD, reported


async def _serve(tmp_path: Path, workspace: Path, env: dict[str, str]) -> tuple[
    asyncio.subprocess.Process, str
]:  # fmt: skip
    port = free_port()
    cmd = [sys.executable, "-m", "retinue", "mcp", "serve", "--http", "--port", str(port),
           "--model", "openai:test"]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=env, cwd=workspace, stderr=asyncio.subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient() as plain:
        for _ in range(1200):  # 120 s for the server to start (polled)
            try:
                refused = await plain.post(f"{url}/mcp", json={})
            except httpx.TransportError:
                await asyncio.sleep(0.1)
                continue
            assert refused.status_code == 401  # no token, no entry: the proxy adds it
            return proc, url
    proc.kill()
    raise AssertionError("retinue mcp serve --http did not start")


async def _suite(base: str, revision: str, out: Path) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(NODE), str(SUITE), "server", "--url", f"{base}/mcp", "--requirements", revision,
        "-o", str(out), cwd=HERE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(proc.communicate(), 170)
    return output.decode(errors="replace")


def _checks(out: Path) -> dict[str, list[dict[str, object]]]:
    """Each scenario's checks, from the suite's ``server-<scenario>-<time>/checks.json``."""
    found: dict[str, list[dict[str, object]]] = {}
    for path in out.glob("server-*/checks.json"):
        scenario = re.sub(
            r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", path.parent.name.removeprefix("server-")
        )
        found[scenario] = json.loads(path.read_text())
    return found


async def test_the_conformance_suite_passes_every_scenario_that_applies(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with LoopbackOpenAIServer(ScriptedModel([])) as model_server:
        env = env_for(tmp_path, model_server)
        proc, upstream = await _serve(tmp_path, workspace, env)
        try:
            token = (tmp_path / "home" / "server-token").read_text().strip()
            async with bearer_proxy(upstream, token) as base:
                runs = {r: await _suite(base, r, tmp_path / r) for r in REVISIONS}
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
    failures: list[tuple[str, str, object, object]] = []
    tally: dict[object, int] = {}
    for revision, output in runs.items():
        scenarios = _checks(tmp_path / revision)
        assert scenarios, output[-3000:]
        applies = {s: c for s, c in scenarios.items() if s not in NOT_APPLICABLE}
        assert {"tools-list", "dns-rebinding-protection"} <= set(applies), output[-3000:]
        for scenario, checks in applies.items():
            for check in checks:
                if (scenario, check["id"]) in FIXTURE_CHECKS:
                    continue
                tally[check["status"]] = tally.get(check["status"], 0) + 1
                if check["status"] not in PASSING:
                    failures.append((revision, scenario, check["id"], check.get("errorMessage")))
    print(f"conformance checks of the scenarios that apply: {tally}")  # (-s shows it)
    assert not failures, failures
    assert tally.get("SUCCESS", 0) > 60
