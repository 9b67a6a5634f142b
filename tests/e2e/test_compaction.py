"""History compaction through the real services: a history.compact@2 provider folds old turns."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, to_struct

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "compact-probe"


async def play_turns(services, settings: dict, turns: int):
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=[PROBE], approved_plugins=[PROBE], plugin_settings={PROBE: to_struct(settings)}))).session
        completed = []
        for number in range(turns):
            events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(text=f"I walk to milestone {number}. Then I rest.")]))]
            completed.append(events[-1].turn_completed)
        messages = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages
    return completed, list(messages)


def hook_events(turn) -> list[str]:
    return [entry.event for entry in turn.hook_trace if entry.event in ("PreCompaction", "PostCompaction")]


async def test_old_turns_fold_into_a_summary_past_the_budget(services) -> None:
    turns, messages = await play_turns(services, {"budgetChars": 400, "keepTurns": 1}, 4)
    # The first turn has nothing to fold; later ones pass the 400-character budget.
    assert hook_events(turns[0]) == []
    compacting = [turn for turn in turns if hook_events(turn) == ["PreCompaction", "PostCompaction"]]
    assert compacting, [hook_events(turn) for turn in turns]
    summaries = [m for m in messages if m.role == resources_pb2.MESSAGE_ROLE_SUMMARY]
    assert summaries and summaries[-1].plugin_id == PROBE
    latest = summaries[-1]
    through = from_struct(latest.metadata)["throughSeq"]
    assert "player: I walk to milestone 0." in latest.text
    # The last player turn is kept whole: nothing of it was folded.
    last_player = [m for m in messages if m.role == resources_pb2.MESSAGE_ROLE_PLAYER][-1]
    assert through < last_player.seq
    # A second compaction builds on the previous summary.
    if len(summaries) > 1:
        assert summaries[0].text.splitlines()[0] in latest.text


async def test_a_pre_compaction_abort_keeps_the_history(services) -> None:
    turns, messages = await play_turns(services, {"budgetChars": 100, "keepTurns": 1, "veto": True}, 3)
    assert all(hook_events(turn) in ([], ["PreCompaction"]) for turn in turns)
    assert any(hook_events(turn) == ["PreCompaction"] for turn in turns)
    assert not [m for m in messages if m.role == resources_pb2.MESSAGE_ROLE_SUMMARY]
