"""prompt.history-transform@1 through the real services: providers rewrite what a story prompt sends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import to_struct
from tests.e2e.conftest import minimal_session

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "transform-probe"


def story_prompts(services, session_id: str) -> list[list[dict]]:
    path = Path(services.data_dir) / f"{PROBE}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
    return [row["messages"] for row in rows if row["session"] == session_id]


async def play(services, mode: str, actions: list[str]) -> tuple[str, list]:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(
            requested_plugins=[PROBE], approved_plugins=[PROBE], plugin_settings={PROBE: to_struct({"mode": mode})}))).session
        turns = []
        for text in actions:
            events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(text=text)]))]
            turns.append(events[-1].turn_completed)
        messages = list((await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages)
    return session.id, [turns, messages]


async def test_a_transform_rewrites_the_history_a_story_sends_and_a_failing_one_is_skipped(services) -> None:
    session_id, (turns, messages) = await play(services, "on", ["I open the gate.", "I cross the yard.", "I knock twice."])
    assert all(turn.status == resources_pb2.TURN_STATUS_COMMITTED for turn in turns), [t.status for t in turns]
    prompts = story_prompts(services, session_id)
    assert len(prompts) == 3
    last = prompts[-1]
    users = [m["content"] for m in last if m["role"] == "user"]
    replies = [m["content"] for m in last if m["role"] == "assistant"]
    # `broken` (order 1) failed and was skipped; `mark` (order 2) ran on the untransformed history.
    assert users == ["I cross the yard.", "I knock twice."], users
    assert replies and all(reply.startswith("[seen] ") for reply in replies), replies
    # The stored log is what it was.
    stories = [m.text for m in messages if m.role == resources_pb2.MESSAGE_ROLE_STORY]
    assert stories and not any(text.startswith("[seen]") for text in stories)


async def test_without_a_transform_the_history_is_sent_as_logged(services) -> None:
    session_id, (turns, _) = await play(services, "off", ["I open the gate.", "I cross the yard."])
    last = story_prompts(services, session_id)[-1]
    assert [m["content"] for m in last if m["role"] == "user"] == ["I open the gate.", "I cross the yard."]
    assert not any(m["content"].startswith("[seen]") for m in last if m["role"] == "assistant")
