"""The HTTP/JSON API through the web front and the five services: the same calls as gRPC, in JSON, a turn as
Server-Sent Events, errors with their gRPC status and field violations, and an OpenAPI description."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import pytest_asyncio

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def sse(client: httpx.AsyncClient, url: str, body: dict) -> list[tuple[str, dict]]:
    events = []
    async with client.stream("POST", url, json=body, timeout=60) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    return events


async def test_a_session_plays_through_setup_and_a_turn_in_json(web) -> None:
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as client:
        worlds = (await client.get("/api/worlds")).json()["worlds"]
        assert "demo-world" in [w["id"] for w in worlds]
        session = (await client.post("/api/sessions", json={"worldId": "demo-world", "locale": "en"})).json()["session"]
        assert session["phase"] == "SESSION_PHASE_SETUP", "enums are named in full"
        events = await sse(client, f"/api/sessions/{session['id']}/actions", {"actions": [{"kind": "advance"}]})
        [asked] = [data for name, data in events if name == "interaction"]
        assert asked["id"] == "protagonist" and events[-1][0] == "end" and events[-2][0] == "turnCompleted"

        refused = await client.post(f"/api/sessions/{session['id']}/interactions/protagonist", json={"values": {"name": "Wren", "courage": 9}})
        assert refused.status_code == 400 and refused.json()["code"] == "INVALID_ARGUMENT"
        assert refused.json()["fieldViolations"][0]["field"] == "values.courage"

        events = await sse(client, f"/api/sessions/{session['id']}/interactions/protagonist", {"values": {"name": "Wren", "courage": 4}})
        deltas = [data["text"] for name, data in events if name == "narrativeDelta"]
        assert "".join(deltas).startswith("This is where the story of Wren begins."), "the opening streams as it is told"
        panels = (await client.get(f"/api/sessions/{session['id']}/panels")).json()["panels"]
        assert {p["pluginId"] for p in panels} >= {"char-creator", "inventory"}
        events = await sse(client, f"/api/sessions/{session['id']}/actions", {"actions": [{"kind": "act", "text": "I look around."}]})
        turn = next(data for name, data in events if name == "turnCompleted")
        assert turn["status"] == "TURN_STATUS_COMMITTED" and turn["logicalTurn"] == "1"
        messages = (await client.get(f"/api/sessions/{session['id']}/messages")).json()["messages"]
        assert [m["role"] for m in messages].count("MESSAGE_ROLE_PLAYER") == 3, "the advance that started the setup, the form answer, the action"


async def test_a_turn_is_one_server_sent_event_per_turn_event_though_the_scheduler_sends_batches(web) -> None:
    """The web front asks SubmitActions for batches (services/web/app.py) and opens them: the page gets what it got."""
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as client:
        session = (await client.post("/api/sessions", json={})).json()["session"]
        events = await sse(client, f"/api/sessions/{session['id']}/actions", {"actions": [{"kind": "act", "text": "I look around."}]})
    names = [name for name, _ in events]
    assert "batch" not in names and names[0] == "turnStarted" and names[-2:] == ["turnCompleted", "end"], names
    first_text = names.index("narrativeDelta")
    assert "runtimeStarted" in names[:first_text] and "runtimeFinished" in names[first_text:], names
    turn = events[-2][1]
    assert "".join(data["text"] for name, data in events if name == "narrativeDelta") == turn["narrative"]


async def test_the_story_moves_in_json(web) -> None:
    """Regenerate, the versions and choosing one, rewind, branch: the scheduler's moves over HTTP/JSON."""
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as client:
        session = (await client.post("/api/sessions", json={})).json()["session"]
        at = f"/api/sessions/{session['id']}"

        async def played(url: str, body: dict) -> dict:
            return next(data for name, data in await sse(client, url, body) if name == "turnCompleted")

        async def moved(url: str, body: dict) -> httpx.Response:
            """A move waits while the session's detached work (the core plugins' jobs) holds its lease: ABORTED, retried."""
            for _ in range(120):
                answer = await client.post(url, json=body)
                if answer.json().get("code") != "ABORTED":
                    return answer
                await asyncio.sleep(0.5)
            raise AssertionError(f"{url} stayed busy: {answer.json()}")

        first = await played(f"{at}/actions", {"actions": [{"kind": "act", "text": "I knock."}]})
        second = await played(f"{at}/actions", {"actions": [{"kind": "act", "text": "I enter."}]})
        again = await played(f"{at}/retry", {})
        assert again["versionOf"] == second["id"] and again["sourceTurnId"] == second["id"]
        versions = (await client.get(f"{at}/versions")).json()
        assert [v["id"] for v in versions["versions"]] == [second["id"], again["id"]] and versions["chosen"] == 1
        chose = await moved(f"{at}/versions", {"turnId": second["id"]})
        assert chose.status_code == 200, chose.json()
        assert (await client.get(f"{at}/versions")).json().get("chosen", 0) == 0, "proto3 JSON leaves a 0 out"
        rewound = (await moved(f"{at}/rewind", {"turnId": first["id"], "requestId": "rw"})).json()["session"]
        assert rewound["headTurnId"] == first["id"]
        texts = [m["text"] for m in (await client.get(f"{at}/messages")).json()["messages"] if m["role"] == "MESSAGE_ROLE_PLAYER"]
        assert texts == ["I knock."]
        branch = (await moved(f"{at}/branch", {"turnId": first["id"]})).json()["session"]
        assert branch["id"] != session["id"] and branch["headTurnId"]
        refused = await moved(f"{at}/rewind", {"turnId": second["id"]})
        assert refused.status_code == 409 and refused.json()["reason"] == "TURN_OFF_LINE", refused.json()


async def test_bad_requests_get_the_grpc_status_and_the_field(web) -> None:
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as client:
        missing = await client.get("/api/sessions/no-such-session")
        assert missing.status_code == 404 and missing.json()["code"] == "NOT_FOUND"
        unknown = await client.post("/api/sessions", json={"wrldId": "demo-world"})
        assert unknown.status_code == 400 and unknown.json()["fieldViolations"][0]["field"] == "body" and "wrldId" in unknown.json()["message"]
        not_json = await client.post("/api/sessions", content=b"{nope")
        assert not_json.status_code == 400 and "is not JSON" in not_json.json()["message"]
        session = (await client.post("/api/sessions", json={})).json()["session"]
        empty = await client.post(f"/api/sessions/{session['id']}/actions", json={"actions": []})
        assert empty.status_code == 400 and empty.json()["fieldViolations"][0]["field"] == "actions"
        bad_query = await client.get(f"/api/sessions/{session['id']}/interactions", params={"includeAnswered": "maybe"})
        assert bad_query.status_code == 400 and bad_query.json()["fieldViolations"][0]["field"] == "includeAnswered"


async def test_the_openapi_description_names_every_route_with_its_json_schemas(web) -> None:
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as client:
        document = (await client.get("/api/openapi.json")).json()
    assert document["openapi"].startswith("3.1")
    submit = document["paths"]["/api/sessions/{session_id}/actions"]["post"]
    assert "text/event-stream" in submit["responses"]["200"]["content"]
    body = submit["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert set(body) == {"actions", "idempotencyKey"}, "the path carries sessionId"
    action = document["components"]["schemas"]["covel.scheduler.v1.PlayerAction"]["properties"]
    assert {"kind", "text", "fields", "interaction"} <= set(action)


async def test_the_web_front_counts_its_requests_and_answers_health(web) -> None:
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as client:
        assert (await client.get("/healthz")).json() == {"status": "SERVING"}
        assert (await client.get("/readyz")).json()["scheduler"] == "SERVING"
        await client.get("/api/worlds")
        exposed = (await client.get(web.metrics_url)).text
    assert 'covel_web_requests_total{method="GET",route="/api/worlds",status="200"}' in exposed
    assert "covel_web_request_duration_seconds_bucket" in exposed
    # And a JSON line in its log, with the services' fields (service, level, timestamp, event).
    lines = [json.loads(line) for line in (web.group.log_dir / "web.log").read_text().splitlines() if '"http.request"' in line]
    [worlds] = [line for line in lines if line["route"] == "/api/worlds"][-1:]
    assert (worlds["service"], worlds["level"], worlds["method"], worlds["status"]) == ("web", "info", "GET", 200)
    assert worlds["duration_ms"] >= 0 and worlds["timestamp"]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def guarded_web(tmp_path_factory):
    """A scheduler that asks for a bearer token, behind the web front (which holds none of its own)."""
    from tests.e2e.conftest import running_services
    from tests.web.conftest import running_web

    async with running_services(tmp_path_factory.mktemp("guarded"), extra_env={"COVEL_API_TOKEN": "s3cret-token"}) as group, \
            running_web(group) as front:
        yield front


async def test_the_callers_own_bearer_token_is_what_the_scheduler_checks(guarded_web) -> None:
    async with httpx.AsyncClient(base_url=guarded_web.url, timeout=30) as client:
        refused = await client.get("/api/worlds")
        assert refused.status_code == 401 and refused.json()["code"] == "UNAUTHENTICATED"
        wrong = await client.get("/api/worlds", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        allowed = await client.get("/api/worlds", headers={"authorization": "Bearer s3cret-token"})
        assert allowed.status_code == 200 and allowed.json()["worlds"]
        assert "s3cret" not in refused.text + wrong.text, "no token is echoed back"


async def test_a_killed_scheduler_is_a_clear_503_and_not_ready(tmp_path) -> None:
    from tests.e2e.conftest import running_services
    from tests.web.conftest import running_web

    async with running_services(tmp_path / "data") as group, running_web(group) as front:
        group.processes["scheduler"].kill()
        await group.processes["scheduler"].wait()
        async with httpx.AsyncClient(base_url=front.url, timeout=30) as client:
            down = await client.get("/api/worlds")
            assert down.status_code == 503 and down.json()["code"] == "UNAVAILABLE" and down.json()["message"]
            turn = await client.post("/api/sessions/any/actions", json={"actions": [{"kind": "act", "text": "Hello."}]})
            assert turn.status_code == 503 and turn.json()["code"] == "UNAVAILABLE", "a streamed call refused before its first event"
            ready = await client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["scheduler"] == "UNREACHABLE"
            assert (await client.get("/healthz")).status_code == 200, "the process itself is alive"
