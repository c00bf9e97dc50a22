"""Transcripts over HTTP against a real server on 127.0.0.1: a conversation whose main agent
delegates to a sub-agent leaves both transcripts once each session ends; they are listed,
read (by transcript id and by session id), searched, and seen by their own tenant only."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from serverkit import Serve

from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)


def test_transcripts_are_kept_listed_read_searched_and_stay_in_their_tenant(
    serve: Serve,
) -> None:
    main = ScriptedModel([
        call_tool("SubAgent", {"task": "where do swallows winter?", "role": "slowpoke"}),
        "They winter in Africa.",
    ])  # fmt: skip
    slow = ScriptedModel(
        [
            call_tool("Read", {"file_path": "birds.md"}),
            "Swallows winter in Africa, says birds.md.",
            call_tool("memorize", {"block_updates": [], "new_passages": ["swallows: Africa"]}),
        ],
        name="scripted:slow",
    )
    server = serve(main, slow, memory=True)
    (server.runtime.settings.workspace / "birds.md").write_text("swallow: a migratory bird\n")
    alice, bob = (server.client(token=server.issue(n)) for n in ("alice", "bob"))
    own = server.client()
    with alice, bob, own:
        sent = alice.post("/v1/conversations/c1/messages", json={"content": "swallows?"})
        assert sent.status_code == 200, sent.text
        assert alice.delete("/v1/conversations/c1").status_code == 200  # the main session ends

        listed = alice.get("/v1/transcripts").json()["transcripts"]
        by_session = {t["session_id"]: t for t in listed}
        assert set(by_session) == {"conv-c1", "conv-c1/slowpoke#1"}  # ids as alice sees them
        child = by_session["conv-c1/slowpoke#1"]
        assert (child["parent_id"], child["role"], child["kind"]) == ("conv-c1", "slowpoke",
                                                                     "one-shot")  # fmt: skip
        assert (child["tool_calls"], child["outcome"], child["requests"]) == (1, "done", 2)
        assert "@alice" not in str(listed)

        whole = alice.get(f"/v1/transcripts/{by_session['conv-c1']['id']}").json()
        assert [c["id"] for c in whole["children"]] == [child["id"]]
        assert whole["entries"][-1]["content"] == "They winter in Africa."

        path = f"/v1/sessions/{quote('conv-c1/slowpoke#1', safe='/')}/transcript"
        read = alice.get(path).json()
        assert read["id"] == child["id"]
        assert alice.get(f"/v1/sessions/{child['id']}/transcript").json()["id"] == child["id"]
        calls = [e for e in read["entries"] if e.get("tool_calls")]
        assert calls[0]["tool_calls"][0]["name"] == "Read"
        assert any("a migratory bird" in e["content"] for e in read["entries"])

        hits = alice.get("/v1/transcripts/search", params={"q": "migratory swallow"}).json()
        assert [h["id"] for h in hits["hits"]] == [child["id"]]
        assert "«" in hits["hits"][0]["snippet"]

        for other in (bob, own):  # another tenant: nothing, and 404 as if there were none
            assert other.get("/v1/transcripts").json()["transcripts"] == []
            assert other.get("/v1/transcripts/search", params={"q": "swallow"}).json()["hits"] == []
            assert other.get(f"/v1/transcripts/{child['id']}").status_code == 404
            assert other.get(path).status_code == 404
            assert other.get(f"/v1/sessions/{child['id']}/transcript").status_code == 404
        assert alice.get("/v1/transcripts/t-nothere").status_code == 404
        assert alice.get("/v1/transcripts", params={"parent": "@alice/conv-c1"}).json() == {
            "transcripts": []
        }
