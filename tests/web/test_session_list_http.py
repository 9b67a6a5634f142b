"""The session list's moves and a turn's token gauge through the web front and the five services: RenameSession
(idempotent, refused by field), delete (EndSession SESSION_ENDING_DELETED: the session and its records are gone),
and a turn's usage (prompt and completion tokens, calls, the context it filled and the window its gateway slot names)."""

from __future__ import annotations

import httpx
import pytest

from tests.web import windowed
from tests.web.test_http_api import sse

pytestmark = pytest.mark.asyncio(loop_scope="session")
# The module's services: the gateway slot names a context window.
windowed_web = windowed.windowed_web


async def test_a_session_is_renamed_idempotently_and_a_bad_title_is_refused_by_field(windowed_web) -> None:
    async with httpx.AsyncClient(base_url=windowed_web.url, timeout=30) as client:
        session = (await client.post("/api/sessions", json={"title": "First"})).json()["session"]
        at = f"/api/sessions/{session['id']}"
        renamed = await client.post(f"{at}/rename", json={"title": "  The lighthouse  "})
        assert renamed.status_code == 200 and renamed.json()["session"]["title"] == "The lighthouse"
        changed_at = renamed.json()["session"]["updatedAt"]
        again = await client.post(f"{at}/rename", json={"title": "The lighthouse"})
        assert again.status_code == 200 and again.json()["session"]["updatedAt"] == changed_at, "the same title changes nothing"
        listed = (await client.get("/api/sessions")).json()["sessions"]
        assert [s["title"] for s in listed if s["id"] == session["id"]] == ["The lighthouse"]

        for title, words in (("   ", "is empty"), ("x" * 501, "at most 500"), ("two\nlines", "control character")):
            refused = await client.post(f"{at}/rename", json={"title": title})
            assert refused.status_code == 400 and refused.json()["fieldViolations"][0]["field"] == "title", refused.json()
            assert words in refused.json()["fieldViolations"][0]["description"]
        missing = await client.post("/api/sessions/no-such-session/rename", json={"title": "x"})
        assert missing.status_code == 404 and missing.json()["reason"] == "SESSION_NOT_FOUND", missing.json()

        ended = await client.post(f"{at}/end", json={})
        assert ended.json()["session"]["status"] == "SESSION_STATUS_ENDED"
        late = await client.post(f"{at}/rename", json={"title": "Kept, read-only"})
        assert late.status_code == 200 and late.json()["session"]["title"] == "Kept, read-only", (
            "an ended session keeps its record: renamed too"
        )


async def test_a_deleted_session_and_its_records_are_gone(windowed_web) -> None:
    async with httpx.AsyncClient(base_url=windowed_web.url, timeout=30) as client:
        session = (await client.post("/api/sessions", json={})).json()["session"]
        at = f"/api/sessions/{session['id']}"
        await sse(client, f"{at}/actions", {"actions": [{"kind": "act", "text": "I knock."}]})
        assert (await client.get(f"{at}/messages")).json()["messages"]
        deleted = await client.post(f"{at}/end", json={"reason": "SESSION_ENDING_DELETED"})
        assert deleted.status_code == 200 and not deleted.json().get("session"), deleted.json()
        for path in ("", "/messages", "/turns"):
            gone = await client.get(f"{at}{path}")
            assert gone.status_code == 404 and gone.json()["reason"] == "SESSION_NOT_FOUND", (path, gone.json())
        again = await client.post(f"{at}/end", json={"reason": "SESSION_ENDING_DELETED"})
        assert again.status_code == 404, "nothing is left of it: a second delete finds no session (the page reads that as done)"
        listed = (await client.get("/api/sessions", params={"includeEnded": "true"})).json().get("sessions", [])
        assert session["id"] not in [s["id"] for s in listed]


async def test_a_turn_reports_its_tokens_and_the_context_it_filled(windowed_web) -> None:
    async with httpx.AsyncClient(base_url=windowed_web.url, timeout=30) as client:
        session = (await client.post("/api/sessions", json={})).json()["session"]
        at = f"/api/sessions/{session['id']}"
        events = await sse(client, f"{at}/actions", {"actions": [{"kind": "act", "text": "I look at the sea for a long while."}]})
        turn = next(data for name, data in events if name == "turnCompleted")
        usage = turn["usage"]
        assert int(usage["promptTokens"]) > 0 and int(usage["completionTokens"]) > 0 and usage["calls"] >= 1, usage
        assert usage["contextWindow"] == "8192", "the window the gateway slot names"
        per_runtime = [r["usage"] for r in turn["runtimeResults"] if "usage" in r]
        assert sum(int(u["promptTokens"]) for u in per_runtime) == int(usage["promptTokens"])
        assert int(usage["contextTokens"]) == max(int(u["contextTokens"]) for u in per_runtime) <= int(usage["promptTokens"])
        read = (await client.get(f"{at}/turns/{turn['id']}")).json()["turn"]
        assert read["usage"] == usage, "the turn read back says the same"
