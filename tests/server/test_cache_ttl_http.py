"""The 1-hour prompt cache over the HTTP service: a conversation on Claude (the loopback
Messages API, its prompt cache emulated, time let pass by the test), ``config.toml``'s
``[model_settings]`` choosing ``cache_ttl``; the next message after a 10-minute pause reads
the conversation's prefix from the cache only with ``1h``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from serverkit import ServerThread

from retinue.config import Settings
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)

FABLE = "anthropic:claude-fable-5-2"


@pytest.fixture
def claude(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackAnthropicServer]:
    replies = ScriptedModel(responder=lambda msgs, tools: f"noted ({len(msgs)} messages)")
    with LoopbackAnthropicServer(replies).start() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        yield server


def first_read_after_pause(
    claude: LoopbackAnthropicServer, home: Path, workspace: Path, config: str
) -> int:
    server = claude
    home.mkdir()
    (home / "config.toml").write_text(config)
    settings = Settings.load(home=home, workspace=workspace)
    service = ServerThread(Runtime.create(settings, with_memory=False)).start()
    try:
        with service.client() as client:
            url = "/v1/conversations/review/messages"
            assert client.post(url, json={"content": "review a.py"}).status_code == 200
            server.cache.advance(600)  # the user comes back ten minutes later
            before = len(server.cache_uses)
            assert client.post(url, json={"content": "and b.py"}).status_code == 200
    finally:
        service.stop()
    return server.cache_uses[before].read


def test_the_next_message_after_a_pause_reads_the_cache_only_with_the_hour(
    claude: LoopbackAnthropicServer, tmp_path: Path
) -> None:
    plain = f'model = "{FABLE}"\n'
    hour = plain + f'[model_settings."{FABLE}"]\ncache_ttl = "1h"\n'
    assert first_read_after_pause(claude, tmp_path / "a", tmp_path, plain) == 0
    assert first_read_after_pause(claude, tmp_path / "b", tmp_path, hour) > 1_000
    server = claude
    assert server.requests[-1]["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert server.rejected == []
