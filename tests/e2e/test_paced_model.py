"""The paced model server of `make bench` (bench/paced_model.py): a real HTTP server that streams at its set time to
first token and tokens per second, with the usage at the end, and a turn the five services play against it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from bench.paced_model import PacedModel, serving
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from tests.e2e.conftest import minimal_session, running_services

STORY_CALL = {
    "model": "paced", "stream": True, "stream_options": {"include_usage": True},
    "messages": [{"role": "system", "content": 'You are the runtime "narrator" of the plugin "narrator" in an interactive story.'},
                 {"role": "user", "content": "I open the door of the old library."}],
    "response_format": {"type": "json_schema", "json_schema": {"name": "narrative-engine@2", "schema": {}}},
}
# Generous: a loaded machine (load 6+ on 2 cores) delays a write, never sends one early.
LATE_S = 3.0


async def read_stream(url: str, body: dict) -> tuple[list[float], list[dict]]:
    """The arrival time (from the request) of each chunk with output, and every chunk."""
    arrivals, chunks = [], []
    async with httpx.AsyncClient(timeout=30) as client:
        started = time.monotonic()
        async with client.stream("POST", url + "/chat/completions", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line.removeprefix("data: "))
                chunks.append(chunk)
                if any(choice["delta"].get("content") for choice in chunk["choices"]):
                    arrivals.append(time.monotonic() - started)
    return arrivals, chunks


@pytest.mark.asyncio(loop_scope="session")
async def test_the_server_streams_at_its_set_pace_and_reports_usage() -> None:
    model = PacedModel(ttft_s=0.3, tokens_per_s=40)
    async with serving(model) as url:
        arrivals, chunks = await read_stream(url, STORY_CALL)
    record = model.calls[0]
    text = "".join(choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"])
    assert json.loads(text)["segments"], "a story as the scripted model writes it"
    assert record.runtime_id == "narrator" and record.completion == text
    # The first token not before its time, the last not before the pace allows, both within generous margins.
    floor_last = 0.3 + (record.completion_tokens - 1) / 40
    assert 0.3 - 0.01 <= arrivals[0] <= 0.3 + LATE_S
    assert floor_last - 0.01 <= arrivals[-1] <= floor_last + LATE_S
    assert record.completion_tokens > 40, "long enough that the pace shows"
    assert chunks[-1]["usage"] == {"prompt_tokens": record.prompt_tokens, "completion_tokens": record.completion_tokens,
                                   "total_tokens": record.prompt_tokens + record.completion_tokens}


@pytest.mark.asyncio(loop_scope="session")
async def test_a_request_that_is_not_a_chat_completion_gets_a_clear_400() -> None:
    async with serving(PacedModel()) as url, httpx.AsyncClient() as client:
        empty = await client.post(url + "/chat/completions", json={"model": "paced", "messages": []})
        garbled = await client.post(url + "/chat/completions", content=b"{not json")
        embed = await client.post(url + "/embeddings", json={"input": []})
    assert empty.status_code == 400 and "messages must be a non-empty list" in empty.json()["error"]["message"]
    assert garbled.status_code == 400 and "not a chat completion request" in garbled.json()["error"]["message"]
    assert embed.status_code == 400 and "input must be" in embed.json()["error"]["message"]
    with pytest.raises(ValueError, match="tokens/s > 0"):
        PacedModel(tokens_per_s=0)


@pytest.mark.asyncio(loop_scope="session")
async def test_the_services_play_a_turn_against_the_paced_model(tmp_path: Path) -> None:
    model = PacedModel(ttft_s=0.2, tokens_per_s=200)
    async with serving(model) as url, running_services(tmp_path, extra_env=model.gateway_env(url)) as group:
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            session = (await stub.CreateSession(minimal_session())).session
            request = scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text="I light the lantern.")])
            started = time.monotonic()
            events = [event async for event in stub.SubmitActions(request)]
            elapsed = time.monotonic() - started
    turn = events[-1].turn_completed
    assert turn.status == resources_pb2.TURN_STATUS_COMMITTED
    assert "light the lantern" in turn.narrative
    story = [call for call in model.calls if call.runtime_id == "narrator" and call.stream]
    assert story and story[-1].completion_tokens > 0 and story[-1].prompt_tokens > 0
    assert elapsed >= story[-1].floor_s - 0.01, "the turn waited for the model at its pace"
    deltas = [e.narrative_delta.text for e in events if e.WhichOneof("event") == "narrative_delta"]
    assert len(deltas) > 1, "the story streamed in pieces as the model sent them"
