"""``retinue run`` on Claude with ``cache_ttl = "1h"``: two runs ten minutes apart (the
loopback Messages API's emulated prompt cache, time let pass by the test) share the prompt
prefix (tools and system prompt); the second reads it only with the hour."""

from __future__ import annotations

from pathlib import Path

import pytest
from runkit import retinue_run

from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(90)

FABLE = "anthropic:claude-fable-5-2"


@pytest.mark.parametrize(("ttl", "reads"), [(None, False), ("1h", True)])
def test_a_run_ten_minutes_later_reads_the_prefix_only_with_the_hour(
    tmp_path: Path, ttl: str | None, reads: bool
) -> None:
    config = f'[model_settings."{FABLE}"]\ncache_ttl = "{ttl}"\n' if ttl else ""
    model = ScriptedModel(["First answer.", "Second answer."])
    with LoopbackAnthropicServer(model) as server:
        first = retinue_run(FABLE, "summarise a.py", server.base_url, tmp_path, config)
        server.cache.advance(600)
        second = retinue_run(FABLE, "summarise b.py", server.base_url, tmp_path, config)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "Second answer." in second.stdout
    written, again = server.cache_uses
    assert written.read == 0 and written.written > 1_000  # tools and system prompt
    assert (again.read > 1_000) is reads
    assert again.read == 0 or again.read <= written.written
