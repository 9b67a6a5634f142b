"""tabletop-rules has no model of its own: its checks reach the story's prompt. Against recorded replies, through the
five services: the narrator's request (and chat-mode-narrator's plan and narrate) carry this turn's resolved
checks, from the plugin's prompt segment (narrator, narrate) and its tabletop-check@1 receipt (plan)."""

from __future__ import annotations

import uuid

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel_cli.play import DEFAULT_WORLD
from shared.settings import REPO_ROOT
from shared.structs import from_struct, to_struct
from tests.e2e.recorded_model import recorded, recorded_services
from tests.support.builtin_plugins import SETUP_PLUGINS

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = REPO_ROOT / "plugins"
PLUGIN = "tabletop-rules"
QUIET = [*SETUP_PLUGINS, "memory", "history-compaction", "guide", "affinity", "inventory", "dice-check"]
HEADING = "Attribute checks of this turn, already resolved by the rules (tell each outcome as it fell; do not mention numbers or dice):"
OUTCOMES = {"critical-success": "a critical success", "success": "a success", "failure": "a failure", "critical-failure": "a critical failure"}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-recorded-tabletop"), [PLUGINS], {"COVEL_RANDOM_SEED": "recorded"}) as (model, stub, store):
        yield model, stub, store


async def _events(call):
    events = [event async for event in call]
    return {r.runtime_id: r for r in events[-1].turn_completed.runtime_results}


async def _setup(stub, plugins: list[str]) -> str:
    session_id = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
        world_id=DEFAULT_WORLD, excluded_plugins=QUIET, requested_plugins=plugins))).session.id
    await _events(stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="advance")])))
    await _events(stub.SubmitInteraction(scheduler_pb2.SubmitInteractionRequest(
        session_id=session_id, interaction_id="point-buy", values=to_struct({"might": 1, "agility": 4, "wits": 2}), idempotency_key=uuid.uuid4().hex)))
    return session_id


async def _climb(stub, session_id: str) -> dict:
    return await _events(stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
        session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text="I climb the steep wall behind the inn.")],
        idempotency_key=uuid.uuid4().hex)))


async def test_the_narrator_is_told_the_checks_outcome(stack) -> None:
    model, stub, _ = stack
    model.replies.update({"narrator": [recorded("narrator-en-1")]})
    session_id = await _setup(stub, [PLUGIN])
    model.requests.clear()
    ran = await _climb(stub, session_id)
    [check] = from_struct(ran[f"{PLUGIN}/check"].output)["checks"]
    assert ran["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    [narrator] = model.of("narrator")
    assert f"{HEADING}\n- I climb the steep wall behind the inn. (Agility, hard): {OUTCOMES[check['outcome']]}" in narrator.system
    assert str(check["total"]) not in narrator.system.split(HEADING, 1)[1].split("\n\n", 1)[0], "no numbers"

    model.requests.clear()
    await _events(stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
        session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text="I rest by the fire.")], idempotency_key=uuid.uuid4().hex)))
    assert HEADING not in model.of("narrator")[0].system, "only this turn's checks"


async def test_chat_mode_narrator_reads_the_receipt_and_the_segment(stack) -> None:
    model, stub, _ = stack
    model.replies.update({"chat-mode-narrator/narrate": [recorded("chat-mode-narrator-narrate-en-1")]})
    session_id = await _setup(stub, [PLUGIN, "chat-mode-narrator"])
    model.requests.clear()
    ran = await _climb(stub, session_id)
    receipt = from_struct(ran[f"{PLUGIN}/check"].output)
    # The plan (a function) passes the receipt's verdict on to narrate.
    assert model.of("chat-mode-narrator/plan") == []
    assert from_struct(ran["chat-mode-narrator/plan"].output)["outcome"] == receipt["checks"][0]["outcome"]
    [narrate] = model.of("chat-mode-narrator/narrate")
    assert HEADING in narrate.system and ran["chat-mode-narrator/narrate"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
