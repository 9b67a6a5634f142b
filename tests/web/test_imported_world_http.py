"""An imported card's world over the web front's HTTP/JSON API: its openings listed with the world, a session
started on one of them (`openingId`, with the card's macros expanded), an unknown one refused by field."""

from __future__ import annotations

import httpx
import pytest
import pytest_asyncio

from services.registry.importing.importer import import_bytes
from tests.e2e.conftest import running_services
from tests.importing import cards
from tests.web.conftest import running_web

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def web(tmp_path_factory):
    worlds = tmp_path_factory.mktemp("worlds")
    import_bytes(cards.card_png(cards.v3_card()), worlds, "coast")
    async with running_services(tmp_path_factory.mktemp("web"), extra_env={"COVEL_WORLD_DIRS": str(worlds)}) as group, \
            running_web(group) as front:
        yield front


async def test_a_session_starts_on_a_picked_greeting(web) -> None:
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as client:
        world = (await client.get("/api/worlds/coast")).json()["world"]
        session = (await client.post("/api/sessions", json={"worldId": "coast", "openingId": "greeting-2"})).json()["session"]
        messages = (await client.get(f"/api/sessions/{session['id']}/messages")).json()["messages"]
        refused = await client.post("/api/sessions", json={"worldId": "coast", "openingId": "greeting-7"})
    assert [(o["id"], o.get("groupOnly", False)) for o in world["openings"]] == [("greeting-1", False), ("greeting-2", False), ("group-1", True)]
    assert messages[0]["text"] == "The lamp is out, you."
    assert refused.status_code == 400 and refused.json()["fieldViolations"][0]["field"] == "opening_id"
