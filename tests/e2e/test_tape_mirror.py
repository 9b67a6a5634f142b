"""provide_tape_store through the five services: tests/fixtures/plugins/tape-store-probe (written against the spec's
signature only; its in-memory TapeStore starts empty) is turned on after two turns of a session, in its sandbox
worker, and its tape ends up with every turn's entries in order: the earlier ones filled from the store's log."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from tests.e2e.conftest import minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "tape-store-probe"


def appended(data_dir: Path, session_id: str) -> list[dict]:
    path = data_dir / f"{PROBE}.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [entry for entry in map(json.loads, lines) if entry["tape"] == session_id]


async def submit(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, text: str) -> resources_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)])
    events = [event async for event in stub.SubmitActions(request)]
    turn = events[-1].turn_completed
    assert turn.status == resources_pb2.TURN_STATUS_COMMITTED and turn.narrative, turn.abort_reason
    return turn


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "in-process"])
async def test_a_tape_store_that_joins_after_two_turns_gets_every_turn_in_order(tmp_path: Path, sandboxed: bool) -> None:
    extra_env = {} if sandboxed else {"COVEL_SANDBOX_ENABLED": "false"}
    async with running_services(tmp_path, extra_env=extra_env) as group:
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            # The narrator alone: no detached job's background turn runs beside the player's turns (a background turn's
            # TurnStart between a player turn's TurnStart and its message:sent is a known gap of the mirror).
            session = (await stub.CreateSession(minimal_session())).session
            turns = [await submit(stub, session.id, "I wake in the inn."), await submit(stub, session.id, "I go downstairs.")]
            await stub.SetSessionPlugins(scheduler_pb2.SetSessionPluginsRequest(session_id=session.id, enable=[PROBE]))
            await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=session.id, approve=[PROBE]))
            turns.append(await submit(stub, session.id, "I order breakfast."))
            turns.append(await submit(stub, session.id, "I pay and leave."))
        deadline = time.monotonic() + 15
        while len(tape := appended(tmp_path, session.id)) < 2 * len(turns):
            assert time.monotonic() < deadline, tape
            await asyncio.sleep(0.1)
    story_ids = [next(m.id for m in turn.messages if m.role == resources_pb2.MESSAGE_ROLE_STORY) for turn in turns]
    expected = [entry for turn, story_id in zip(turns, story_ids, strict=True) for entry in (
        {"tape": session.id, "role": "user", "content": turn.player_message, "turn_id": turn.id},
        {"tape": session.id, "role": "story", "content": turn.narrative, "turn_id": turn.id, "message_id": story_id})]
    assert tape == expected
    assert [entry["content"] for entry in tape[::2]] == ["I wake in the inn.", "I go downstairs.", "I order breakfast.",
                                                         "I pay and leave."]
