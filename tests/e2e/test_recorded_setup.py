"""The setup builtins' model-driven runtimes against recorded real-model replies, through the five services
(tests/e2e/recorded_model.py): world-init's schema-gen (a world without a character schema) and
dimension-tracker, char-creator's character-tracker, and the narrator's opening from pregame's brief. Checks
the requests the kernel really sends (prompts in en and zh, tools, response formats, inputs) and what the
recorded answers commit; answers that break the rules fail their runtime or are corrected, and commit nothing
wrong."""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from covel.common.v1 import common_pb2
from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value, to_struct
from tests.e2e.recorded_model import recorded, recorded_services
from tests.e2e.test_recorded_replies import prompt_body

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = REPO_ROOT / "plugins"
# The model-driven plugins this module is not about stay out (test_recorded_replies.py plays them).
OTHERS = ["guide", "inventory", "affinity", "memory"]
TRACKER, CHARACTERS, SCHEMA_GEN = "world-init/dimension-tracker", "format:character-changes", "format:generated-world"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    worlds = tmp_path_factory.mktemp("worlds")
    (worlds / "bare").mkdir()
    (worlds / "bare" / "world.yaml").write_text("name: Bare\ndescription: A storm coast with no rules of its own.\n", encoding="utf-8")
    env = {"COVEL_RANDOM_SEED": "recorded", "COVEL_WORLD_DIRS": f"{REPO_ROOT / 'worlds'}:{worlds}"}
    async with recorded_services(tmp_path_factory.mktemp("covel-recorded-setup"), [PLUGINS], env) as (model, stub, store):
        yield model, stub, store


async def turn(stub, session_id: str, action: common_pb2.PlayerAction) -> store_pb2.Turn:
    events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[action]))]
    return events[-1].turn_completed


async def answer(stub, session_id: str, values: dict) -> store_pb2.Turn:
    events = [e async for e in stub.SubmitInteraction(scheduler_pb2.SubmitInteractionRequest(
        session_id=session_id, interaction_id="protagonist", values=to_struct(values)))]
    return events[-1].turn_completed


async def world_of(store, session_id: str) -> store_pb2.GetWorldResponse:
    return await store.GetWorld(store_pb2.GetWorldRequest(session_id=session_id))


async def jobs_done(store, session_id: str) -> None:
    """Wait for the session's detached jobs (character-tracker) to finish, so the next turn's requests are its own."""
    for _ in range(300):
        jobs = (await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session_id))).jobs
        if all(job.status not in ("queued", "running") for job in jobs):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the detached jobs did not finish")


async def set_up(model, stub, store, world_id: str, locale: str, name: str) -> tuple[str, store_pb2.Turn]:
    """A session through its setup; the trackers of the opening turn see no change."""
    model.replies.update({TRACKER: [recorded("dimension-tracker-no-change")], CHARACTERS: [recorded("character-tracker-no-change")]})
    session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id=world_id, locale=locale, excluded_plugins=OTHERS))).session
    await turn(stub, session.id, resources_pb2.PlayerAction(kind="advance"))
    opening = await answer(stub, session.id, {"name": name, "courage": 4, "role": "a lamp-maker"})
    await jobs_done(store, session.id)
    return session.id, opening


async def test_english_opening_and_trackers_send_their_prompts_and_commit_what_the_model_settled(stack) -> None:
    model, stub, store = stack
    model.replies["narrator"] = [recorded("narrator-opening-en")]
    session_id, opening = await set_up(model, stub, store, "demo-world", "en", "Wren")
    assert opening.status == store_pb2.TURN_STATUS_COMMITTED, opening.abort_reason
    [asked] = model.of("narrator")
    assert "When runtime-inputs.opening has a brief, this is the first scene" in asked.system
    assert "Open the story. Wren (The player's character, off the evening coach" in asked.system, "pregame's brief is the narrator's input"
    assert asked.body["messages"][-1]["content"].endswith("name: Wren; courage: 4; role: a lamp-maker"), "the answer is the player's message"
    assert opening.narrative.startswith("The coach rattles away into the dusk and leaves Wren")

    before = len(model.of(TRACKER))
    model.replies.update({"narrator": [recorded("narrator-lamp-en")],
                          TRACKER: [recorded("dimension-tracker-en-1a"), recorded("dimension-tracker-bad-value"), recorded("dimension-tracker-en-1b")],
                          CHARACTERS: [recorded("character-tracker-en-1")]})
    lamp = await turn(stub, session_id, resources_pb2.PlayerAction(kind="act", text="I climb the tower and light the lamp."))
    results = {r.runtime_id: r for r in lamp.runtime_results}
    assert results[TRACKER].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results[TRACKER].reason
    steps = model.of(TRACKER)[before:]
    assert [r.step for r in steps] == [0, 1, 2], "a list, a refused value, the corrected settlement"
    assert prompt_body("world-init/runtimes/dimension-tracker/RUNTIME.md") in steps[0].system
    assert {"world-dimension-list", "world-dimension-get", "update-dimensions"} <= set(steps[0].tool_names)
    assert "It's lit. Gods, it's lit." in steps[0].system, "the turn's story is its input"
    refused = steps[2].body["messages"][-1]["content"]
    assert "blazing" in refused and '"ok": false' in refused, "the bad value came back as a tool error"
    world = await world_of(store, session_id)
    assert {d.id: from_value(d.value) for d in world.dimensions} == {"lighthouse": "lit", "missing-boats": 2}
    assert not [r for r in world.pending_settlements if r.status == "pending"], "the tracker settled the turn"

    # character-tracker runs as a job after the turn: courage 5 holds, `luck` is no attribute of Saltmere.
    for _ in range(200):
        hero = next(from_struct(c.data) for c in (await world_of(store, session_id)).characters if c.id == "traveller")
        if hero["attributes"]["courage"] == 5:
            break
        await asyncio.sleep(0.05)
    assert hero["attributes"] == {"courage": 5, "role": "a lamp-maker"} and hero["name"] == "Wren"
    tracked = model.of(CHARACTERS)[-1]
    assert tracked.body["response_format"]["json_schema"]["schema"]["properties"]["changes"]["items"]["properties"]["attribute"]["enum"] \
        == ["courage", "role"]
    assert "You track how the story changes the player's character." in tracked.body["messages"][-1]["content"]
    assert "light the lamp" in tracked.body["messages"][-1]["content"]


async def test_chinese_session_sends_the_zh_prompts(stack) -> None:
    model, stub, store = stack
    model.replies["narrator"] = [recorded("narrator-opening-zh")]
    session_id, opening = await set_up(model, stub, store, "demo-world", "zh", "阿雯")
    assert "runtime-inputs.opening 带有 brief 时" in model.of("narrator")[-1].system
    assert "开始故事。阿雯" in model.of("narrator")[-1].system
    assert opening.narrative.startswith("马车在暮色中远去")
    tracker = model.of(TRACKER)[-1]
    assert prompt_body("world-init/runtimes/dimension-tracker/RUNTIME.zh.md") in tracker.system
    assert "你负责记录故事对玩家角色的改变" in model.of(CHARACTERS)[-1].body["messages"][-1]["content"]


async def test_schema_gen_gives_a_bare_world_the_generated_schema_and_refuses_a_short_one(stack) -> None:
    model, stub, store = stack
    model.replies[SCHEMA_GEN] = [recorded("schema-gen-short")]
    short = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="bare", excluded_plugins=OTHERS))).session
    failed = await turn(stub, short.id, resources_pb2.PlayerAction(kind="advance"))
    results = {r.runtime_id: r for r in failed.runtime_results}
    assert results["world-init/schema-gen"].status == resources_pb2.RUNTIME_STATUS_FAILED
    assert "the model gave 10 usable attributes; at least 15 are needed" in results["world-init/schema-gen"].reason
    assert results["char-creator/player-init"].status == resources_pb2.RUNTIME_STATUS_FAILED and "no characterSchema yet" in results["char-creator/player-init"].reason
    assert not (await world_of(store, short.id)).HasField("character_schema"), "nothing of the failed runtime committed"
    progress = from_struct((await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=short.id))).session.setup_runtimes["world-init/schema-gen"])
    assert progress["state"] == "pending" and progress["attempts"] == 1 and "at least 15" in progress["lastError"]

    model.replies[SCHEMA_GEN] = [recorded("schema-gen-en-1")]
    session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="bare", excluded_plugins=OTHERS))).session
    events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
        session_id=session.id, actions=[resources_pb2.PlayerAction(kind="advance")]))]
    asked = model.of(SCHEMA_GEN)[-1]
    assert asked.body["response_format"]["json_schema"]["schema"]["properties"]["attributes"]["minItems"] == 15
    assert "You design the rules of a story world." in asked.body["messages"][-1]["content"]
    world = await world_of(store, session.id)
    assert len(from_struct(world.character_schema)["attributes"]) == 16
    assert {d.id: from_value(d.value) for d in world.dimensions} == {"storm": "gathering", "debt": 120}
    [form] = [e.interaction for e in events if e.WhichOneof("event") == "interaction"]
    assert from_struct(form.spec)["fieldOrder"][:4] == ["name", "agility", "background", "calling"], "the name, then attributes by id"
