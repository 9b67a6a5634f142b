"""SubmitActions in batches (issue 39, docs/api.md "Batched events") through the five services: a client that asks
gets the events ready together as one message, every event the turn streams and in its order (checked against
WatchTurn's replay of the same turn, one event a message); the first story text is not held for company; a client
that does not ask, or one built from the released API, gets one event a message as before."""

from __future__ import annotations

import statistics
import time

import pytest
import pytest_asyncio
from google.protobuf import unknown_fields

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.turn_event_batches import events_of
from tests.e2e.conftest import minimal_session, running_services
from tests.e2e.test_released_wire import SERVICE, released

pytestmark = pytest.mark.asyncio(loop_scope="session")
# Bookkeeping may wait this long for company, and the model streams its story a piece every CHUNK_DELAY_MS: story
# text held for company would come BATCH_MS late (or with the story's end), far past the margin for a loaded machine.
BATCH_MS = 2000
CHUNK_DELAY_MS = 50


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def scheduler_addr(tmp_path_factory):
    env = {"COVEL_SCHEDULER_STREAM_BATCH_MS": str(BATCH_MS), "COVEL_GATEWAY_SCRIPTED_CHUNK_DELAY_MS": str(CHUNK_DELAY_MS)}
    async with running_services(tmp_path_factory.mktemp("batched"), extra_env=env) as group:
        yield group.addrs["scheduler"]


@pytest_asyncio.fixture(loop_scope="session")
async def scheduler(scheduler_addr):
    async with open_channel(scheduler_addr) as channel:
        yield scheduler_pb2_grpc.SchedulerStub(channel)


def submit_request(session_id: str, text: str, *, batched: bool) -> scheduler_pb2.SubmitActionsRequest:
    return scheduler_pb2.SubmitActionsRequest(session_id=session_id, batch_events=batched,
                                              actions=[resources_pb2.PlayerAction(kind="act", text=text)])


async def played(stub, session_id: str, text: str, *, batched: bool) -> list[tuple[float, scheduler_pb2.TurnEvent]]:
    """The stream's messages with the seconds from the request to each."""
    started = time.monotonic()
    return [(time.monotonic() - started, message) async for message in stub.SubmitActions(submit_request(session_id, text, batched=batched))]


def first_turn(events: list[scheduler_pb2.TurnEvent]) -> list[scheduler_pb2.TurnEvent]:
    """The events up to the first turn_completed (a chain's later turns are other turns)."""
    kinds = [event.WhichOneof("event") for event in events]
    return events[:kinds.index("turn_completed") + 1]


def story_joined(events: list[scheduler_pb2.TurnEvent]) -> list[bytes]:
    """The events with consecutive story text of one runtime and segment joined (streams may cut it differently), each
    in its wire form."""
    out: list[scheduler_pb2.TurnEvent] = []
    for event in events:
        last = out[-1] if out else None
        if (last is not None and event.WhichOneof("event") == last.WhichOneof("event") == "narrative_delta"
                and not event.narrative_delta.reset and not last.narrative_delta.reset
                and event.narrative_delta.runtime_id == last.narrative_delta.runtime_id
                and event.narrative_delta.segment == last.narrative_delta.segment):
            joined = scheduler_pb2.TurnEvent()
            joined.CopyFrom(last)
            joined.narrative_delta.text += event.narrative_delta.text
            out[-1] = joined
        else:
            out.append(event)
    return [event.SerializeToString(deterministic=True) for event in out]


async def watched(stub, session_id: str, turn_id: str) -> list[scheduler_pb2.TurnEvent]:
    """WatchTurn's replay of a turn this scheduler streamed: every event it streamed, one a message."""
    return [event async for event in stub.WatchTurn(scheduler_pb2.WatchTurnRequest(session_id=session_id, turn_id=turn_id))]


async def test_a_batched_stream_carries_every_event_of_the_turn_in_order(scheduler) -> None:
    # Every core plugin: runtimes before and after the story, hooks, proposals.
    session = (await scheduler.CreateSession(scheduler_pb2.CreateSessionRequest())).session
    messages = [message for _, message in await played(scheduler, session.id, "I light the lantern.", batched=True)]
    events = [event for message in messages for event in events_of(message)]
    turn = first_turn(events)
    assert turn[0].WhichOneof("event") == "turn_started"
    replay = await watched(scheduler, session.id, turn[0].turn_started.turn_id)
    assert all(message.WhichOneof("event") != "batch" for message in replay)
    assert story_joined(turn) == story_joined(replay)
    # Fewer messages than events, and a batch never holds a batch.
    assert any(message.WhichOneof("event") == "batch" for message in messages) and len(messages) < len(events)
    assert all(event.WhichOneof("event") != "batch" for event in events)


async def test_a_client_that_does_not_ask_gets_one_event_a_message(scheduler) -> None:
    session = (await scheduler.CreateSession(scheduler_pb2.CreateSessionRequest())).session
    events = [message for _, message in await played(scheduler, session.id, "I light the lantern.", batched=False)]
    assert all(event.WhichOneof("event") not in (None, "batch") for event in events)
    turn = first_turn(events)
    assert story_joined(turn) == story_joined(await watched(scheduler, session.id, turn[0].turn_started.turn_id))


async def test_a_client_of_the_released_api_reads_every_message_as_one_known_event(scheduler, scheduler_addr) -> None:
    classes, pool = released()
    method = pool.FindServiceByName(SERVICE).methods_by_name["SubmitActions"]
    request_type, event_type = classes[method.input_type.full_name], classes[method.output_type.full_name]
    session = (await scheduler.CreateSession(scheduler_pb2.CreateSessionRequest())).session
    request = request_type(session_id=session.id, actions=[classes["covel.scheduler.v1.PlayerAction"](kind="act", text="I open the door.")])
    async with open_channel(scheduler_addr) as channel:
        call = channel.unary_stream(f"/{SERVICE}/SubmitActions", request_serializer=request_type.SerializeToString,
                                    response_deserializer=event_type.FromString)
        events = [event async for event in call(request, timeout=60)]
    assert events and events[-1].WhichOneof("event") == "turn_completed"
    # No message carries what the released TurnEvent does not know (a batch would be an unknown field 12).
    assert all(event.WhichOneof("event") is not None and not len(unknown_fields.UnknownFieldSet(event)) for event in events)
    replay = await watched(scheduler, session.id, events[0].turn_started.turn_id)
    assert story_joined([scheduler_pb2.TurnEvent.FromString(event.SerializeToString()) for event in first_turn(events)]) == story_joined(replay)


async def test_the_first_story_text_is_not_held_for_company(scheduler) -> None:
    """Runtime starts may wait BATCH_MS for the next message; the story's first text goes at once and they ride with it."""
    first_text: dict[bool, list[float]] = {True: [], False: []}
    ended: dict[bool, list[float]] = {True: [], False: []}
    sessions = {batched: (await scheduler.CreateSession(minimal_session())).session.id for batched in (True, False)}
    for step in range(3):
        for batched in (True, False):
            stream = await played(scheduler, sessions[batched], f"I walk on, step {step}.", batched=batched)
            at, message = next((at, message) for at, message in stream
                               if any(event.WhichOneof("event") == "narrative_delta" for event in events_of(message)))
            first_text[batched].append(at)
            ended[batched].append(stream[-1][0])
            if batched:
                kinds = [event.WhichOneof("event") for event in events_of(message)]
                assert "runtime_started" in kinds[:kinds.index("narrative_delta")], kinds
    # Text held for company would come BATCH_MS (2 s) late, and so would a turn's end held by the bookkeeping
    # after the story; the margin is for a loaded machine.
    for times in (first_text, ended):
        assert statistics.median(times[True]) < statistics.median(times[False]) + BATCH_MS / 2000, times
