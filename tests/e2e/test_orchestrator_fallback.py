"""The character orchestrator with a fallback narration through the real services (issue 40;
shared.plugin_sdk.orchestration): a story function asks the session's character-actor@1 provider for each planned
speaker in order and tells their parts with their names; a speaker without a character, a character the world
lacks, an actor whose answer stays invalid and a call past the budget each become a narration line, and a turn
where nobody is planned still tells a story."""

from __future__ import annotations

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel_cli.play import DEFAULT_WORLD
from shared.grpc_client import open_channel
from shared.plugin_sdk.orchestration import FALLBACK_LINES, FALLBACK_NARRATIONS
from shared.structs import from_struct, to_struct
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, restart_gateway, running_services
from tests.support.builtin_plugins import SETUP_PLUGINS, story_world_plugins_except

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "ensemble-probe"
TELL = f"{PROBE}/tell"
MIRA, TOBIN = {"name": "Mira", "characterId": "mira"}, {"name": "Old Tobin", "characterId": "tobin"}
WELCOME = {
    "json": {
        "segments": [{"kind": "dialogue", "text": "Welcome, traveller."}, {"kind": "action", "text": "She smiles."}],
        "intent": "win their trust",
    }
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ensemble_services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("ensemble"), script={}) as group:
        yield group


async def tell(services, settings: dict) -> tuple[resources_pb2.RuntimeResult, list]:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        request = scheduler_pb2.CreateSessionRequest(
            world_id=DEFAULT_WORLD,
            excluded_plugins=[*SETUP_PLUGINS, *NON_STORY_CORE_PLUGINS, *story_world_plugins_except()],
            requested_plugins=[PROBE],
            approved_plugins=[PROBE],
        )
        request.plugin_settings[PROBE].CopyFrom(to_struct(settings))
        session = (await stub.CreateSession(request)).session
        events = [
            event
            async for event in stub.SubmitActions(
                scheduler_pb2.SubmitActionsRequest(
                    session_id=session.id, actions=[resources_pb2.PlayerAction(text="Good evening, everyone.")]
                )
            )
        ]
        turn = (
            await stub.GetTurn(scheduler_pb2.GetTurnRequest(session_id=session.id, turn_id=events[-1].turn_completed.id))
        ).turn
    result = next(r for r in turn.runtime_results if r.runtime_id == TELL)
    marks = [(e.event, e.status) for e in turn.hook_trace if e.event.startswith("subagent.")]
    return result, marks


def line(name: str) -> dict:
    return {"kind": "narration", "text": FALLBACK_LINES["en"].format(name=name)}


async def test_the_actors_parts_are_told_in_order_and_each_missing_part_is_narrated(ensemble_services) -> None:
    # Mira answers; Old Tobin's answer stays invalid after its one repair.
    await restart_gateway(ensemble_services, {"queues": {"actor": [WELCOME, {"text": "not json"}, {"text": "still not json"}]}})
    speakers = [MIRA, TOBIN, {"name": "The ghost", "characterId": "nobody-here"}, {"name": "A stranger"}]
    result, marks = await tell(ensemble_services, {"speakers": speakers})
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    assert from_struct(result.output)["segments"] == [
        {"kind": "dialogue", "speaker": "Mira", "text": "Welcome, traveller."},
        {"kind": "action", "speaker": "Mira", "text": "She smiles."},
        line("Old Tobin"),
        line("The ghost"),
        line("A stranger"),
    ]
    # Two calls were admitted (the missing character was refused before admission; the stranger was never asked).
    ok, error = resources_pb2.HOOK_STATUS_OK, resources_pb2.HOOK_STATUS_ERROR
    assert marks == [("subagent.started", ok), ("subagent.completed", ok), ("subagent.started", ok), ("subagent.failed", error)]
    assert "win their trust" not in str(result), "intent serves the orchestration only"


async def test_a_call_past_the_budget_is_narrated_and_nobody_planned_still_tells_a_story(ensemble_services) -> None:
    await restart_gateway(ensemble_services, {"queues": {"actor": [WELCOME]}})
    result, _ = await tell(ensemble_services, {"speakers": [MIRA, TOBIN], "maxSubagentCalls": 1})
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    assert [s.get("speaker") for s in from_struct(result.output)["segments"]] == ["Mira", "Mira", None]
    assert from_struct(result.output)["segments"][-1] == line("Old Tobin")
    nobody, marks = await tell(ensemble_services, {"speakers": []})
    assert nobody.status == resources_pb2.RUNTIME_STATUS_SUCCESS and not marks
    assert from_struct(nobody.output)["segments"] == [{"kind": "narration", "text": FALLBACK_NARRATIONS["en"]}]
