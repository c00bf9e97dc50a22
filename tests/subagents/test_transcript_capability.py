"""Which roles get ``ReadTranscript``: those with the ``transcripts`` capability or that
name the tool, and only where transcripts are kept (a memory store, retention above 0)."""

from __future__ import annotations

from pathlib import Path

from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.subagents.roles import parse_role
from retinue.testing import ScriptedModel

ROLE = """---
name: {name}
description: Leads others.
tools: [Read{more}]
{caps}
---
You lead.
"""


def role(name: str, *, caps: str = "", more: str = ""):
    return parse_role(Path(f"{name}.md"), ROLE.format(name=name, caps=caps, more=more))


def test_read_transcript_goes_to_the_roles_that_may_read_their_childrens(tmp_path: Path) -> None:
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(settings, model=ScriptedModel())
    factory = runtime.manager.factory
    try:
        for r, gets in [
            (role("lead", caps="capabilities: [transcripts]"), True),
            (role("named", more=", ReadTranscript"), True),
            (role("plain"), False),
        ]:
            assert ("ReadTranscript" in factory.tools_for(r).names) is gets, r.name
    finally:
        assert runtime.memory is not None
        runtime.memory.close()

    settings.transcript_retention_days = 0  # none kept: nothing to read
    off = Runtime.create(settings, model=ScriptedModel())
    try:
        lead = role("lead", caps="capabilities: [transcripts]")
        assert "ReadTranscript" not in off.manager.factory.tools_for(lead).names
    finally:
        assert off.memory is not None
        off.memory.close()
