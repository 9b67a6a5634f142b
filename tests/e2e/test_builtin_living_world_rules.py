"""living-world-rules through the five services, on the scripted model, in the fixture world Bellwater
(tests/fixtures/living-worlds/bellwater): the world's rules and what everyone knows (read by convention from its
data/rules.yaml and data/world-info.yaml) are in its right panel and in every story prompt, in the session's
language; a session without a world's rules shows the empty panel and adds nothing to the prompt."""

from __future__ import annotations

import json
import uuid

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct
from shared.ui_panels import render_text
from tests.e2e.conftest import minimal_session, running_services
from tests.support.builtin_plugins import SETUP_PLUGINS

pytestmark = pytest.mark.asyncio(loop_scope="session")
WORLDS = REPO_ROOT / "tests" / "fixtures" / "living-worlds"
PROBE = "event-key-probe"  # its PreLLMCall hook reports each model call's system prompt in the turn stream
RULE = "The lighthouse must never go dark two nights running."


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def bellwater(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("world-rules"), extra_env={"COVEL_WORLD_DIRS": str(WORLDS)}) as group:
        yield group


async def narrator_prompt(stub, session_id: str, text: str) -> tuple[str, resources_pb2.Turn]:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="act", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    events = [event async for event in stub.SubmitActions(request)]
    systems = [json.loads(e.hook.message)["system"] for e in events
               if e.WhichOneof("event") == "hook" and e.hook.event == "PreLLMCall" and e.hook.runtime_id == "narrator"]
    return systems[0], events[-1].turn_completed


async def rules_panel(stub, session_id: str):
    panels = (await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session_id))).panels
    [panel] = [p for p in panels if p.plugin_id == "living-world-rules"]
    return panel, from_struct(panel.state)


async def test_the_worlds_rules_are_in_the_panel_and_every_story_prompt(bellwater) -> None:
    async with open_channel(bellwater.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id="bellwater", requested_plugins=[PROBE], approved_plugins=[PROBE], excluded_plugins=SETUP_PLUGINS))).session
        panel, state = await rules_panel(stub, session.id)
        assert panel.location == resources_pb2.UI_SLOT_RIGHT and panel.file == "ui/right.json"
        assert sorted(state["data"]["rules"]) == ["dark-nights", "the-bell"] and state["data"]["info"]["ferry"]["title"] == "The ferry"
        lines = render_text(from_struct(panel.spec), state)
        assert lines[:3] == ["World rules", RULE, "No one sails after the evening bell; a boat that leaves after it is never seen again."]
        assert any("seventh day" in line for line in lines)

        prompts = []
        for text in ("I climb to the lamp room.", "I row out after the evening bell."):
            system, turn = await narrator_prompt(stub, session.id, text)
            assert turn.status == resources_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
            assert {r.runtime_id: r.status for r in turn.runtime_results}["narrator"] == resources_pb2.RUNTIME_STATUS_SUCCESS
            prompts.append(system)
        for system in prompts:
            assert "Rules of this world. They hold for the whole story" in system and RULE in system
            assert "- The ferry: Ysolde's ferry comes every seventh day with the mail." in system
        # Read-only: the plugin has no runtime, and the story never changes the rules.
        assert (await rules_panel(stub, session.id))[1]["data"] == state["data"]


async def test_a_chinese_session_reads_the_translated_rules(bellwater) -> None:
    async with open_channel(bellwater.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id="bellwater", locale="zh", requested_plugins=[PROBE], approved_plugins=[PROBE], excluded_plugins=SETUP_PLUGINS))).session
        _, state = await rules_panel(stub, session.id)
        assert state["data"]["rules"]["dark-nights"]["content"] == "灯塔绝不能连续两夜熄灭。"
        system, _ = await narrator_prompt(stub, session.id, "我爬上灯室。")
        assert "这个世界的规则。" in system and "- 灯塔绝不能连续两夜熄灭。" in system and "- 渡船：伊索尔德的渡船每七天来一次，带来信件。" in system
        assert RULE not in system


async def test_without_a_worlds_rules_the_panel_is_empty_and_the_prompt_unchanged(bellwater) -> None:
    async with open_channel(bellwater.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(
            requested_plugins=["living-world-rules", PROBE], approved_plugins=[PROBE], excluded_plugins=SETUP_PLUGINS))).session
        assert "living-world-rules" in session.active_plugins
        panel, state = await rules_panel(stub, session.id)
        assert render_text(from_struct(panel.spec), state) == ["World rules", "This world sets no rules of its own."]
        system, turn = await narrator_prompt(stub, session.id, "I look around.")
        assert turn.status == resources_pb2.TURN_STATUS_COMMITTED and "Rules of this world" not in system
