"""A world's dimensions kept by a trusted plugin, through the five services: tide-keeper provides
world.dimensions@1 and turns the tide each turn. From one of the operator's own plugin folders it is a
trusted owner and its updates commit; installed as a community plugin (approved to run) it is not, and the
store refuses them as untrusted-writer."""

from __future__ import annotations

import os

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_value
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, running_services

TRUSTED = REPO_ROOT / "tests" / "fixtures" / "trusted-plugins"
COVE = """\
name: Cove
dimensions:
  tide: {name: Tide, schema: {enum: [low, high]}, initial: low}
pluginPolicy: {plus: [tide-keeper]}
"""


async def play_two_turns(tmp_path, builtin: bool) -> tuple[list, list]:
    worlds = tmp_path / "worlds"
    (worlds / "cove").mkdir(parents=True)
    (worlds / "cove" / "world.yaml").write_text(COVE, encoding="utf-8")
    env = {"COVEL_WORLD_DIRS": str(worlds)}
    if builtin:
        env["COVEL_BUILTIN_PLUGIN_DIRS"] = os.pathsep.join([str(REPO_ROOT / "plugins"), str(TRUSTED)])
    async with running_services(tmp_path / "data", plugin_dirs=(TRUSTED,), extra_env=env) as group, \
            open_channel(group.addrs["scheduler"]) as channel, group.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id="cove", excluded_plugins=NON_STORY_CORE_PLUGINS, approved_plugins=["tide-keeper"]))).session
        outcomes = []
        for text in ("I watch the sea.", "I wait."):
            request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(kind="act", text=text)])
            turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
            outcomes.append({o.code for o in turn.proposal_outcomes if o.status != store_pb2.PROPOSAL_STATUS_COMMITTED})
        world = await store_pb2_grpc.TransactionalStoreStub(store_channel).GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
    return outcomes, [(d.id, from_value(d.value), d.version) for d in world.dimensions]


async def test_a_trusted_owner_turns_the_worlds_tide(tmp_path) -> None:
    outcomes, dimensions = await play_two_turns(tmp_path, builtin=True)
    assert outcomes == [set(), set()]
    assert dimensions == [("tide", "low", 3)]  # low → high → low


async def test_a_community_plugin_is_no_trusted_owner(tmp_path) -> None:
    outcomes, dimensions = await play_two_turns(tmp_path, builtin=False)
    assert outcomes == [{"untrusted-writer"}] * 2
    assert dimensions == [("tide", "low", 1)]
