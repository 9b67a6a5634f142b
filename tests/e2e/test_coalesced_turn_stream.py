"""SubmitActions through the five services sends the story text that is ready at once as one message
(issue 19): fewer messages, the same story, and text that comes slowly is not held back."""

from __future__ import annotations

import time

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from services.gateway.providers.scripted.provider import CHUNK_MAX
from services.scheduler.agent.story_stream import PARAGRAPH_BREAK
from shared.grpc_client import open_channel
from tests.e2e.conftest import minimal_session, running_services

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
CHUNK_DELAY_S = 0.04


async def play(scheduler_addr: str, text: str) -> list[tuple[float, scheduler_pb2.TurnEvent]]:
    """One turn's events with the time each arrived."""
    async with open_channel(scheduler_addr) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session())).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text=text)])
        return [(time.monotonic(), event) async for event in stub.SubmitActions(request)]


def story(events: list[tuple[float, scheduler_pb2.TurnEvent]]) -> tuple[list[tuple[float, scheduler_pb2.NarrativeDelta]], store_pb2.Turn]:
    deltas = [(at, event.narrative_delta) for at, event in events if event.WhichOneof("event") == "narrative_delta"]
    (turn,) = [event.turn_completed for _, event in events if event.WhichOneof("event") == "turn_completed"]
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED
    assert "".join(delta.text for _, delta in deltas) == turn.narrative
    return deltas, turn


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def slow_model_services(tmp_path_factory):
    """The services with a scripted model that waits CHUNK_DELAY_S before each 8-16 character piece."""
    env = {"COVEL_GATEWAY_SCRIPTED_CHUNK_DELAY_MS": str(int(CHUNK_DELAY_S * 1000))}
    async with running_services(tmp_path_factory.mktemp("slow-model"), extra_env=env) as group:
        yield group


async def test_a_story_ready_at_once_is_one_message_per_segment(services) -> None:
    events = await play(services.addrs["scheduler"], "I light the lantern and step into the cellar.")
    deltas, turn = story(events)
    kinds = [event.WhichOneof("event") for _, event in events]
    # Text of one segment is one message; a paragraph break between segments stays a message of its own.
    segments = sum(delta.text == PARAGRAPH_BREAK for _, delta in deltas) + 1
    assert len(deltas) == 2 * segments - 1, [delta.text for _, delta in deltas]
    # Before issue 19 a story was one message per 8-16 characters (about 40 a turn).
    assert len(deltas) < len(turn.narrative) / CHUNK_MAX
    # The order of the other events is kept: the runtime starts, writes, then finishes.
    first_text, last_text = kinds.index("narrative_delta"), len(kinds) - 1 - kinds[::-1].index("narrative_delta")
    assert "runtime_started" in kinds[:first_text] and "runtime_finished" in kinds[last_text:]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_completed"


async def test_text_that_comes_slowly_goes_as_it_comes(slow_model_services) -> None:
    events = await play(slow_model_services.addrs["scheduler"], "I wait by the door.")
    deltas, turn = story(events)
    # The model writes at least one piece per CHUNK_MAX characters, CHUNK_DELAY_S apart: far more
    # than the flush interval, so the pieces are not joined and the first is not held for the rest.
    pieces = len(turn.narrative) / CHUNK_MAX
    assert len(deltas) >= pieces / 2
    completed_at = events[-1][0]
    assert completed_at - deltas[0][0] >= (pieces - 1) * CHUNK_DELAY_S * 0.7
