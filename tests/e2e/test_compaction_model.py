"""history-compaction with a model slot, through the real services: the builtin provider asks the
kernel for one model call, the summary is made from the model's structured answer, and a model that
fails or takes too long leaves the mechanical summary."""

from __future__ import annotations

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import to_struct
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGIN = "history-compaction"
# The scripted gateway: the `broken` slot answers an error, the `slow` slot answers after 3 s.
SCRIPT = {"rules": [{"match": "Turns to fold", "slots": ["broken"], "reply": {"error": {"status": 400, "message": "bad request"}}},
                    {"match": "Turns to fold", "slots": ["slow"], "reply": {"text": "{}", "delay_ms": 3000}}]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("covel-compaction-model"), script=SCRIPT) as group:
        yield group


async def summaries(services, settings: dict, turns: int = 4, locale: str = "en") -> list[str]:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        excluded = [plugin for plugin in NON_STORY_CORE_PLUGINS if plugin != PLUGIN]
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            excluded_plugins=excluded, locale=locale,
            plugin_settings={PLUGIN: to_struct({"budgetChars": 400, "keepTurns": 1, **settings})}))).session
        for number in range(turns):
            text = f"我走到第 {number} 块里程碑。然后休息。" if locale == "zh" else f"I walk to milestone {number}. Then I rest."
            events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(text=text)]))]
            assert events[-1].turn_completed.status == resources_pb2.TURN_STATUS_COMMITTED
        messages = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages
    return [m.text for m in messages if m.role == resources_pb2.MESSAGE_ROLE_SUMMARY and m.plugin_id == PLUGIN]


async def test_with_a_model_slot_the_summary_is_the_models(services) -> None:
    texts = await summaries(services, {"modelSlot": "fast"})
    assert texts, "the story passed the budget"
    first = texts[0].splitlines()
    assert first[0].startswith("In the earlier turns the player did this, in order: I walk to milestone 0."), texts[0]
    assert first[1] == "Remember:" and first[2].startswith("- ")


async def test_a_chinese_session_gets_a_chinese_model_summary(services) -> None:
    texts = await summaries(services, {"modelSlot": "fast"}, locale="zh")
    assert texts and texts[0].startswith("玩家先后我走到第 0 块里程碑"), texts
    assert "要记住的：" in texts[0]


@pytest.mark.parametrize("settings", [{}, {"modelSlot": "broken"}, {"modelSlot": "slow", "modelTimeoutMs": 1000}],
                         ids=["no-slot", "model-fails", "model-times-out"])
async def test_without_a_working_model_the_summary_is_mechanical(services, settings: dict) -> None:
    texts = await summaries(services, settings)
    assert texts and texts[0].startswith("The player: I walk to milestone 0."), texts
