"""Prompt variants through the five services: the narrator of a Simplified Chinese session gets the zh
variants (its PLUGIN.zh.md body and demo-world's fixed `world` segment from demo-world's PLUGIN.zh.md);
an English session gets the main files. The model is the local recorded-replies server, which keeps
every request the gateway sends it."""

from __future__ import annotations

import uuid

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from shared.settings import REPO_ROOT
from tests.e2e.recorded_model import RecordedModel, recorded, recorded_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = REPO_ROOT / "plugins"
# Only the story engine and the world: every other builtin plugin is left out.
KEPT = ("narrator", "demo-world")
LEFT_OUT = sorted(path.parent.name for path in PLUGINS.glob("*/PLUGIN.md") if path.parent.name not in KEPT)


def body(path: str) -> str:
    return (PLUGINS / path).read_text(encoding="utf-8").split("---", 2)[2].strip()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-variants"), [PLUGINS]) as (model, stub, _store):
        yield model, stub


async def narrator_system_prompt(model: RecordedModel, stub, locale: str, reply: str) -> str:
    created = await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
        requested_plugins=["demo-world"], excluded_plugins=LEFT_OUT, locale=locale, title="variants"))
    assert set(created.session.active_plugins) == set(KEPT), created.session.active_plugins
    model.requests.clear()
    model.replies = {"narrator": [recorded(reply)]}
    request = scheduler_pb2.SubmitActionsRequest(
        session_id=created.session.id, actions=[resources_pb2.PlayerAction(kind="do", text="I look around.")],
        idempotency_key=uuid.uuid4().hex)
    turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    [sent] = model.of("narrator")
    return sent.system


async def test_a_zh_session_reads_the_zh_world_segment_and_prompt(stack) -> None:
    model, stub = stack
    system = await narrator_system_prompt(model, stub, "zh", "narrator-zh-1")
    assert body("narrator/PLUGIN.zh.md") in system and body("narrator/PLUGIN.md") not in system
    assert "世界：盐沼镇，北方寒冷海岸上的一个渔镇" in system and "米拉，港务长" in system
    assert "World: Saltmere" not in system
    # Where the segment stands is the main file's (position: system, after the runtime's prompt).
    assert system.index(body("narrator/PLUGIN.zh.md")) < system.index("世界：盐沼镇")


async def test_an_en_session_reads_the_english_world_segment_and_prompt(stack) -> None:
    model, stub = stack
    system = await narrator_system_prompt(model, stub, "en", "narrator-en-1")
    assert body("narrator/PLUGIN.md") in system and body("narrator/PLUGIN.zh.md") not in system
    assert "World: Saltmere, a fishing town on a cold northern coast" in system
    assert "世界：盐沼镇" not in system
