"""admit_message through the five services: a message submitted while the session's turn runs is refused,
steered into the running turn, or queued, as a plugin written only against the hookspec's signature
(tests/fixtures/plugins/admission-probe) decides; a session without such a plugin is not asked."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from covel_cli.play import _stream_turn
from covel_cli.play_display import Progress
from shared.grpc_client import open_channel
from shared.structs import to_struct
from tests.e2e.conftest import running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "admission-probe"
# The first turn's story is slow, so a second submit arrives while it runs; once the steered text joins
# the run (steering after the draft), the model's next call sees it and answers it.
SCRIPT = {"rules": [
    {"match": "the player interjects", "slots": ["story"],
     "reply": {"json": {"segments": [{"kind": "narration", "text": "You whisper, and the guard turns round."}]}}},
    {"match": "I wait by the gate", "slots": ["story"],
     "reply": {"json": {"segments": [{"kind": "narration", "text": "The guard ignores you."}]}, "delay_ms": 2500}},
]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("covel-admission"), script=SCRIPT) as group:
        yield group


def calls(data_dir: Path) -> list[dict]:
    path = data_dir / "admission-probe.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def as_stream(events: list):
    for event in events:
        yield event


def submit(stub, session_id: str, text: str, key: str = ""):
    return stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
        session_id=session_id, idempotency_key=key, actions=[resources_pb2.PlayerAction(kind="act", text=text)]))


async def slow_turn(stub, plugins: list[str], text: str = "I wait by the gate.", key: str = "") -> tuple[str, asyncio.Task, str]:
    """A session whose first turn runs (its story being written): (session id, the task collecting its events, turn id)."""
    session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=plugins, approved_plugins=plugins))).session
    started: asyncio.Queue[str] = asyncio.Queue()

    async def collect() -> list:
        events = []
        async for event in submit(stub, session.id, text, key):
            events.append(event)
            if event.WhichOneof("event") == "runtime_started" and event.runtime_started.stage == resources_pb2.RUNTIME_STAGE_NARRATIVE:
                await started.put(events[0].turn_started.turn_id)
        return events

    task = asyncio.create_task(collect())
    turn_id = await asyncio.wait_for(started.get(), 30)
    await asyncio.sleep(0.3)
    return session.id, task, turn_id


async def committed_turns(stub, session_id: str) -> list:
    """The session's turns of player input, oldest first (not the continuations auto-advance adds)."""
    turns = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session_id))).turns
    return [turn for turn in turns if turn.origin == resources_pb2.TURN_ORIGIN_PLAYER]


async def test_a_refused_message_fails_with_the_plugins_reason_and_commits_nothing(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session_id, first, turn_id = await slow_turn(stub, [PROBE])
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            [event async for event in submit(stub, session_id, "Wait for me!")]
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert refused.value.details() == ("refused by admission-probe: the scene is still being written; "
                                           "wait for the running turn to end")
        events = await first
        assert events[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
        assert [turn.id for turn in await committed_turns(stub, session_id)] == [turn_id]
    [call] = [c for c in calls(services.data_dir) if c["session_id"] == session_id]
    assert {key: call[key] for key in ("content", "channel", "turn_id", "running")} == {
        "content": "Wait for me!", "channel": "grpc", "turn_id": turn_id, "running": True}
    assert [(action["kind"], action["text"]) for action in call["actions"]] == [("act", "Wait for me!")]


async def test_a_steered_message_joins_the_running_turn_and_its_stream_follows_that_turn(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session_id, first, turn_id = await slow_turn(stub, [PROBE])
        steered = [event async for event in submit(stub, session_id, "Psst, over here!", key="steer-1")]
        assert steered[0].turn_started.turn_id == turn_id and steered[0].turn_started.steered_by == PROBE
        joined = steered[-1].turn_completed
        assert joined.id == turn_id and joined.status == store_pb2.TURN_STATUS_COMMITTED
        # The model's call saw the text as an interjection, and answered it.
        assert "the guard turns round" in joined.narrative and "ignores you" not in joined.narrative
        assert (await first)[-1].turn_completed.id == turn_id
        # covel play says so.
        shown = io.StringIO()
        await _stream_turn(as_stream(steered), shown, Progress(shown))
        assert "(your words join the turn already under way, as admission-probe decided)" in shown.getvalue()
        # A retry with the same key follows the same turn again: no interjection, no turn of its own.
        retried = [event async for event in submit(stub, session_id, "Psst, over here!", key="steer-1")]
        assert retried[0].turn_started.steered_by == PROBE and retried[-1].turn_completed.id == turn_id
        assert [turn.id for turn in await committed_turns(stub, session_id)] == [turn_id]
    assert [c["content"] for c in calls(services.data_dir) if c["session_id"] == session_id] == ["Psst, over here!"]


async def test_a_queued_message_runs_its_own_turn_after_the_running_one(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session_id, first, turn_id = await slow_turn(stub, [PROBE])
        queued = [event async for event in submit(stub, session_id, "I sit down on the bench.")]
        own = next(event.turn_started.turn_id for event in queued if event.WhichOneof("event") == "turn_started")
        assert own != turn_id and queued[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
        assert (await first)[-1].turn_completed.id == turn_id
        assert [turn.id for turn in await committed_turns(stub, session_id)] == [turn_id, own]
    assert [c["content"] for c in calls(services.data_dir) if c["session_id"] == session_id] == ["I sit down on the bench."]


async def test_a_session_without_an_admitting_plugin_queues_without_asking(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session_id, first, turn_id = await slow_turn(stub, [])
        queued = [event async for event in submit(stub, session_id, "Psst, over here!")]
        own = next(event.turn_started.turn_id for event in queued if event.WhichOneof("event") == "turn_started")
        assert own != turn_id
        await first
        assert [turn.id for turn in await committed_turns(stub, session_id)] == [turn_id, own]
    assert not [c for c in calls(services.data_dir) if c["session_id"] == session_id]


async def test_the_hooks_service_lists_admitting_plugins_and_checks_admit_message_requests(services) -> None:
    async with services.channel_as("hooks", "scheduler") as channel:
        hooks = hooks_pb2_grpc.HookDispatcherStub(channel)
        assert PROBE in (await hooks.GetSubscriptions(hooks_pb2.GetSubscriptionsRequest(), timeout=5)).admitting_plugin_ids
        context = hooks_pb2.HookContext(session_id="s-direct", active_plugin_ids=[PROBE], approved_plugin_ids=[PROBE])
        for request, field in ((hooks_pb2.AdmitMessageRequest(turn_id="t"), "context.session_id"),
                               (hooks_pb2.AdmitMessageRequest(context=context), "turn_id"),
                               (hooks_pb2.AdmitMessageRequest(context=context, turn_id="t", step=-1), "step")):
            with pytest.raises(grpc.aio.AioRpcError) as bad:
                await hooks.AdmitMessage(request, timeout=5)
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and bad.value.details().startswith(field)
        message = to_struct({"content": "Psst!", "channel": "grpc", "actions": []})
        steer = await hooks.AdmitMessage(hooks_pb2.AdmitMessageRequest(context=context, message=message, turn_id="t"), timeout=5)
        assert (steer.action, steer.plugin_id) == ("steer", PROBE)
        # Paused (fault breaker) or not active in the session: not asked, queued.
        for asked in (hooks_pb2.HookContext(session_id="s-direct", active_plugin_ids=[PROBE], paused_plugin_ids=[PROBE]),
                      hooks_pb2.HookContext(session_id="s-direct")):
            queued = await hooks.AdmitMessage(hooks_pb2.AdmitMessageRequest(context=asked, message=message, turn_id="t"), timeout=5)
            assert (queued.action, queued.plugin_id) == ("queue", "")


async def test_a_retry_of_the_running_turns_own_submit_is_not_asked_and_gets_that_turn(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        # Its text would be refused were it asked: a retry waits for its own turn instead, and gets its result.
        text = "Wait, I wait by the gate."
        session_id, first, turn_id = await slow_turn(stub, [PROBE], text=text, key="own-1")
        retried = [event async for event in submit(stub, session_id, text, key="own-1")]
        assert retried[-1].turn_completed.id == turn_id
        assert (await first)[-1].turn_completed.id == turn_id
    assert not [c for c in calls(services.data_dir) if c["session_id"] == session_id]
