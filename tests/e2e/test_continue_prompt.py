"""continue_prompt through the five services: the scripted model answers the narrator's first step with a tool
call; continue-probe (tests/fixtures/plugins/, written against the spec's signature only) gives the next step
its prompt, which the model receives as a user message after the tool result; when it answers None nothing
changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from tests.e2e.conftest import minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "continue-probe"
NEXT_PROMPT = "CONTINUE-PROBE: now tell what the search found."
FOUND = "The search turns up a hidden door behind the shelf."
SCRIPT = {
    # One tool step for each session's narrator (in order); the unknown tool is answered with an error, and the loop goes on.
    "queues": {"story": [{"text": "Let me look.", "tool_calls": [{"name": "search-room", "arguments": {"where": "shelf"}}]},
                         {"tool_calls": [{"name": "search-room", "arguments": {"where": "shelf"}}]}]},
    # Only a call whose last user message is the probe's next prompt gets this story.
    "rules": [{"match": "CONTINUE-PROBE", "slots": ["story"],
               "reply": {"json": {"segments": [{"kind": "narration", "text": FOUND}], "yield": "user"}}}],
}


def heard(data_dir: Path, session_id: str, hook: str) -> list[dict]:
    path = data_dir / "continue-probe.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if r["session_id"] == session_id and r["hook"] == hook]


async def play(stub, text: str) -> tuple[str, store_pb2.Turn]:
    session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
    request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text=text)])
    events = [event async for event in stub.SubmitActions(request)]
    return session.id, events[-1].turn_completed


async def test_the_next_prompt_reaches_the_next_model_call_and_none_changes_nothing(tmp_path) -> None:
    async with running_services(tmp_path, script=SCRIPT) as group:
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            prompted, prompted_turn = await play(stub, "I search the room.")
            quiet, quiet_turn = await play(stub, "I search the room quietly.")

    assert prompted_turn.status == store_pb2.TURN_STATUS_COMMITTED, prompted_turn.abort_reason
    # The gateway's rule matched the next prompt as the call's last user message.
    assert prompted_turn.narrative == FOUND
    [asked] = heard(tmp_path, prompted, "continue_prompt")
    assert {k: asked[k] for k in ("step", "status", "output", "prompt", "runtime_id")} == {
        "step": 1, "status": "continue", "output": "Let me look.", "prompt": "I search the room.", "runtime_id": "narrator"}
    assert asked["run_id"] == f"{prompted_turn.id}:narrator" and asked["roles"][-2:] == ["assistant", "tool"]
    first, second = heard(tmp_path, prompted, "before_llm_call")
    assert second["messages"][-1] == {"role": "user", "content": NEXT_PROMPT}
    assert second["messages"][-2]["role"] == "tool" and second["messages"][:len(first["messages"])] == first["messages"]

    assert quiet_turn.status == store_pb2.TURN_STATUS_COMMITTED, quiet_turn.abort_reason
    [asked] = heard(tmp_path, quiet, "continue_prompt")
    assert (asked["output"], asked["prompt"]) == ("", "I search the room quietly.")
    first, second = heard(tmp_path, quiet, "before_llm_call")
    assert second["messages"][-1]["role"] == "tool", "None: no next prompt, the conversation goes on as it would"
    assert len(second["messages"]) == len(first["messages"]) + 2 and quiet_turn.narrative != FOUND
