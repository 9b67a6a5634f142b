"""The builtin model-driven runtimes against recorded real-model replies, through the five services.

The gateway is pointed at a local OpenAI-compatible server (tests/e2e/recorded_model.py) that
answers with replies recorded as a real model gives them (tests/fixtures/recorded/*.json: chat
completions with JSON content or tool calls). For narrator, guide, inventory/ledger, affinity/judge
and memory/extract this checks the request the kernel really sends (preamble, the runtime's own
prompt and its zh variant, the runtime inputs and self data, the tools and response format the
plugin declares, the history window, the player's input) and that the recorded answers are
accepted and commit valid data; and that answers that break the plugin's schema fail their
runtime with the reason and commit nothing of it.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import jsonschema
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from covel_cli.play import DEFAULT_WORLD
from services.scheduler.agent.context import STORY_POINTER
from services.scheduler.contracts import kernel_contract_schema
from shared.kernel_prompts import TASK_PROMPT
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value, to_struct
from tests.e2e.recorded_model import Request, recorded, recorded_services
from tests.support.builtin_plugins import SETUP_PLUGINS, STORY_WORLD_PLUGINS

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = REPO_ROOT / "plugins"
# Sessions start in the demo world (worlds/demo-world): its plugins and settings presets come from the registry.
WORLD = DEFAULT_WORLD
TURN_1 = "I pick up the rusty key from the table, light my lantern and thank Old Tobin for the warm fire."
TURN_2 = "I ask Tobin where the rusty key came from."
TURN_ZH = "我从桌上拿起生锈的钥匙，感谢老托宾的炉火。"
# The demo world's opening: the first story message of its sessions, so history windows that reach
# back to the first turn read it (worlds/demo-world/world.yaml and world.zh.yaml).
OPENING = ("The evening coach leaves you at the harbor of Saltmere. Out on Gull Point the lighthouse is\n"
           "dark. Across the quay, the windows of the Drowned Lantern inn glow warm.")
OPENING_ZH = "傍晚的马车把你放在盐沼镇的港口。鸥角上的灯塔一片漆黑。码头对面，溺灯客栈的窗户透着暖光。"


def schema(path: str) -> dict:
    return json.loads((PLUGINS / path).read_text(encoding="utf-8"))


def prompt_body(path: str) -> str:
    """A RUNTIME.md / PLUGIN.md body (the text after the front matter)."""
    return (PLUGINS / path).read_text(encoding="utf-8").split("---", 2)[2].strip()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-recorded"), [PLUGINS], {"COVEL_RANDOM_SEED": "recorded"}) as (model, stub, store):
        yield model, stub, store


# Every session this module started: a test waits for their detached jobs before it counts model requests.
SESSIONS: list[str] = []


async def new_session(stub, locale: str = "en", store=None) -> str:
    """A session in the world; with `store`, once the earlier sessions' detached jobs are done (a late
    memory/extract of an earlier test would otherwise ask the model in the middle of this one)."""
    if store is not None:
        await detached_jobs_done(store)
    request = scheduler_pb2.CreateSessionRequest(world_id=WORLD, locale=locale, excluded_plugins=[*SETUP_PLUGINS, *STORY_WORLD_PLUGINS])
    SESSIONS.append((await stub.CreateSession(request)).session.id)
    return SESSIONS[-1]


async def detached_jobs_done(store, timeout_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    for session_id in SESSIONS:
        while asyncio.get_running_loop().time() < deadline:
            jobs = (await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session_id))).jobs
            if all(job.status not in ("queued", "running") for job in jobs):
                break
            await asyncio.sleep(0.1)


async def play(stub, session_id: str, text: str) -> store_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


async def data(store, session_id: str, plugin_id: str, namespace: str) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=plugin_id, namespace=namespace))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


async def wait_for_memories(store, session_id: str, count: int) -> dict:
    memories: dict = {}
    for _ in range(300):
        memories = await data(store, session_id, "memory", "memories")
        if len(memories) >= count:
            break
        await asyncio.sleep(0.1)
    return memories


def results(turn: store_pb2.Turn) -> dict[str, store_pb2.RuntimeResult]:
    return {r.runtime_id: r for r in turn.runtime_results}


def one(requests: list[Request], step: int = 0) -> Request:
    found = [r for r in requests if r.step == step]
    assert len(found) == 1, [(r.runtime_id, r.step) for r in requests]
    return found[0]


def chat(request: Request) -> list[tuple[str, str]]:
    """The conversation after the system prompt, as (role, content)."""
    return [(m["role"], m.get("content") or "") for m in request.body["messages"][1:]]


def preamble(runtime_id: str, plugin_id: str, language: str = "English") -> str:
    return f'You are the runtime "{runtime_id}" of the plugin "{plugin_id}" in an interactive story.\nWrite everything the player reads in {language}.'


def inputs_of(request: Request) -> dict:
    system = request.system
    return json.loads(system.split("<runtime-inputs>\n", 1)[1].split("\n</runtime-inputs>", 1)[0])


def reply_format(request: Request) -> tuple[str, dict]:
    wanted = request.body["response_format"]
    assert wanted["type"] == "json_schema"
    return wanted["json_schema"]["name"], wanted["json_schema"]["schema"]


ENGLISH = {
    "narrator": [recorded("narrator-en-1")],
    "guide": [recorded("guide-en-1")],
    "inventory/ledger": [recorded("inventory-ledger-en-1a"), recorded("inventory-ledger-en-1b")],
    "affinity/judge": [recorded("affinity-judge-en-1")],
    "memory/extract": [recorded("memory-extract-en-1a"), recorded("memory-extract-en-1b")],
}
ENGLISH_2 = {
    "narrator": [recorded("narrator-en-2a"), recorded("narrator-en-2b")],
    "guide": [recorded("guide-en-2")],
    "inventory/ledger": [recorded("inventory-ledger-en-2")],
    "affinity/judge": [recorded("affinity-judge-en-2")],
    "memory/extract": [recorded("memory-extract-en-2a"), recorded("memory-extract-en-2b")],
}


async def test_english_prompts_and_recorded_replies_commit_valid_data(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub, store=store)
    model.requests.clear()
    model.replies = ENGLISH
    first = await play(stub, session_id, TURN_1)
    assert first.status == store_pb2.TURN_STATUS_COMMITTED, first.abort_reason
    ran = results(first)
    for runtime_id in ("narrator", "guide", "inventory/ledger", "inventory/apply", "affinity/judge", "affinity/apply"):
        assert ran[runtime_id].status == resources_pb2.RUNTIME_STATUS_SUCCESS, (runtime_id, ran[runtime_id].reason)
    memories = await wait_for_memories(store, session_id, 2)

    # narrator: preamble with the story contract, its prompt, the world, the bound inputs, the person rule,
    # the story schema as response format, memory-search (memory is on), the player's words last; streamed.
    narrator = one(model.of("narrator"))
    system = narrator.system
    assert system.startswith(preamble("narrator", "narrator") + "\nReply with one JSON object that matches the response format narrative-engine@2")
    assert prompt_body("narrator/PLUGIN.md") in system
    assert system.index(prompt_body("narrator/PLUGIN.md")) < system.index("World: Saltmere") < system.index("<runtime-inputs>")
    assert inputs_of(narrator) == {"time": {"value": {"day": 1, "time": "19:30", "period": "dusk", "minutes": 1170}},
                                   "check": {"value": {"checks": []}}}
    assert system.endswith('Narrative person: second. Address the player\'s character as "you".')
    assert reply_format(narrator) == ("narrative-engine_2", kernel_contract_schema("narrative-engine@2"))
    assert "memory-search" in narrator.tool_names and narrator.body["stream"] is True
    assert chat(narrator) == [("assistant", OPENING), ("user", TURN_1)]

    # guide: its prompt, the story it follows as runtime-inputs.narrative, its schema, no tools.
    guide = one(model.of("guide"))
    assert guide.system.startswith(preamble("guide", "guide") + "\n\n" + prompt_body("guide/PLUGIN.md"))
    # This turn's story is a message of its conversation; its input reads a pointer to it (issue 40, 3).
    story_text = chat(guide)[2][1]
    assert inputs_of(guide)["narrative"]["value"] == STORY_POINTER
    assert story_text.startswith("The key is cold and crusted with salt") and "That key was left here" in story_text
    assert reply_format(guide) == ("scene-prompts-1", schema("guide/schemas/scene-prompts.schema.json"))
    assert "tools" not in guide.body and chat(guide) == [("assistant", OPENING), ("user", TURN_1), ("assistant", story_text), ("user", TASK_PROMPT)]

    # inventory/ledger: the stocked inventory as <inventory>, the items tools, its schema; it looked an item up first.
    ledger = one(model.of("inventory/ledger"))
    assert ledger.system.startswith(preamble("inventory/ledger", "inventory") + "\n\n" + prompt_body("inventory/runtimes/ledger/RUNTIME.md"))
    assert inputs_of(ledger) == {"narrative": {"value": STORY_POINTER}}
    shown = ledger.system.split("<inventory>\n", 1)[1].split("\n</inventory>", 1)[0].splitlines()
    assert {row.split(" | ")[0]: json.loads(row.split(" | ")[1]) for row in shown} == {
        "- brass-lantern": {"name": "brass lantern", "quantity": 1, "equipped": False},
        "- copper-coin": {"name": "copper coin", "quantity": 3, "equipped": False},
        "- worn-map": {"name": "worn map", "quantity": 1, "equipped": False}}
    assert ledger.tool_names == ["items-get", "items-list"]
    assert reply_format(ledger) == ("inventory_changes-1", schema("inventory/schemas/changes.schema.json"))
    assert chat(ledger) == [("user", TURN_1), ("assistant", story_text), ("user", TASK_PROMPT)]
    looked_up = one(model.of("inventory/ledger"), step=1)
    tool_answer = json.loads(looked_up.body["messages"][-1]["content"])
    assert looked_up.body["messages"][-1]["tool_call_id"] == "call_Ledg1"
    assert tool_answer["ok"] is True and tool_answer["data"]["value"]["name"] == "brass lantern"

    # affinity/judge: the story's segments as runtime-inputs.story, <affinity> (empty yet), its schema, no tools.
    judge = one(model.of("affinity/judge"))
    assert judge.system.startswith(preamble("affinity/judge", "affinity") + "\n\n" + prompt_body("affinity/runtimes/judge/RUNTIME.md"))
    segments = inputs_of(judge)["story"]["value"]
    assert [s["kind"] for s in segments] == ["narration", "action", "dialogue"] and segments[2]["speaker"] == "Old Tobin"
    assert judge.system.endswith("<affinity>\n(none yet)\n</affinity>")
    assert reply_format(judge) == ("affinity_changes-1", schema("affinity/schemas/changes.schema.json"))
    assert "tools" not in judge.body and chat(judge) == [("assistant", OPENING), ("user", TURN_1), ("assistant", story_text), ("user", TASK_PROMPT)]

    # memory/extract (detached): the turn digest, only memories-upsert with the record's shape, no response format.
    extract = one(model.of("memory/extract"))
    assert extract.system.startswith(preamble("memory/extract", "memory") + "\n\n" + prompt_body("memory/runtimes/extract/RUNTIME.md"))
    digest = inputs_of(extract)["digest"]["value"]
    assert digest["playerMessage"] == TURN_1 and digest["narrativeText"].startswith("The key is cold")
    assert extract.tool_names == ["memories-upsert"] and "response_format" not in extract.body
    upsert = extract.body["tools"][0]["function"]["parameters"]
    record = schema("memory/schemas/memory.schema.json")
    assert upsert["properties"]["value"]["properties"] == record["properties"] and upsert["required"] == ["value"]
    # Detached after its turn: that turn only (maxTurns 0 counts turns by turn id: the world's opening is a
    # turn of its own), then the task, not a story continuation.
    assert [role for role, _ in chat(extract)] == ["user", "assistant", "user"]
    assert chat(extract)[0] == ("user", TURN_1)
    assert chat(extract)[2] == ("user", "(The turn above is over. Do your task for it now.)")
    second_step = one(model.of("memory/extract"), step=1)
    assert [m["tool_call_id"] for m in second_step.body["messages"] if m["role"] == "tool"] == ["call_Mem1", "call_Mem2"]

    # What committed: the recorded answers, valid against each dataset's schema.
    items = await data(store, session_id, "inventory", "items")
    assert items["rusty-key"] == {"id": "rusty-key", "name": "rusty key", "quantity": 1, "equipped": False}
    assert items["brass-lantern"]["equipped"] is True
    scores = await data(store, session_id, "affinity", "scores")
    assert scores == {"tobin": {"id": "tobin", "name": "Old Tobin", "score": 2, "tier": "neutral", "lastChange": 2,
                                "reason": "The player thanked him for the warm fire."}}
    assert set(memories) == {"rusty-key-from-boatman", "tobin-welcomes-player"}
    for namespace, plugin, path in (("items", "inventory", "inventory/schemas/item.schema.json"),
                                    ("scores", "affinity", "affinity/schemas/score.schema.json"),
                                    ("memories", "memory", "memory/schemas/memory.schema.json")):
        for value in (await data(store, session_id, plugin, namespace)).values():
            jsonschema.validate(value, schema(path))
    assert from_struct(ran["guide"].output)["suggestions"][0] == "I ask Old Tobin which boatman left the key."
    assert "You're welcome to the fire, traveller." in first.narrative

    # Turn 2: history windows, a memory-search round trip, the judge's "Tobin" is the same character.
    model.requests.clear()
    model.replies = ENGLISH_2
    second = await play(stub, session_id, TURN_2)
    assert second.status == store_pb2.TURN_STATUS_COMMITTED, second.abort_reason
    assert all(r.status == resources_pb2.RUNTIME_STATUS_SUCCESS for r in second.runtime_results if r.runtime_id != "memory/extract"), \
        [(r.runtime_id, r.reason) for r in second.runtime_results]
    searched = one(model.of("narrator"), step=1)
    found = json.loads(searched.body["messages"][-1]["content"])
    assert searched.body["messages"][-1]["tool_call_id"] == "call_Srch1"
    assert any("rusty key" in json.dumps(hit) for hit in found["data"]["results"]), found
    narrator_2 = one(model.of("narrator"))
    # The history, affinity's prompt.segment@1 projection after it, then the player's words.
    assert [role for role, _ in chat(narrator_2)] == ["assistant", "user", "assistant", "system", "user"]
    assert chat(narrator_2)[1] == ("user", TURN_1) and "That key was left here" in chat(narrator_2)[2][1]
    assert chat(narrator_2)[3] == ("system", "How the characters feel about the player:\n- Old Tobin: 2 (neutral)")
    assert chat(narrator_2)[4] == ("user", TURN_2)
    guide_2 = one(model.of("guide"))
    assert [role for role, _ in chat(guide_2)] == ["assistant", "user", "assistant", "user", "assistant", "user"], \
        "guide reads the last two turns (the opening and turn 1), then this turn's input and story"
    assert [text for role, text in chat(one(model.of("inventory/ledger")))][::2] == [TURN_2, TASK_PROMPT], "maxTurns 0: no earlier turns"
    # maxTurns 1: the last turn (the first one; the opening is a turn of its own); then its own plugin's standing segment.
    assert [role for role, _ in chat(one(model.of("affinity/judge")))] == ["user", "assistant", "system", "user", "assistant", "user"]
    shown = one(model.of("affinity/judge")).system.split("<affinity>\n", 1)[1].split("\n</affinity>", 1)[0]
    assert shown.startswith("- tobin | ") and json.loads(shown.removeprefix("- tobin | "))["name"] == "Old Tobin"
    scores = await data(store, session_id, "affinity", "scores")
    assert list(scores) == ["tobin"] and scores["tobin"]["score"] == 3 and scores["tobin"]["lastChange"] == 1
    memories = await wait_for_memories(store, session_id, 3)
    assert "key-belonged-to-hal-brennan" in memories
    extract_2 = one(model.of("memory/extract"))
    assert TURN_1 not in json.dumps(chat(extract_2)), "the detached extraction reads this turn only"
    assert chat(extract_2)[0] == ("user", TURN_2)


async def test_chinese_session_sends_the_zh_prompts_and_keeps_chinese_answers(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub, "zh", store=store)
    model.requests.clear()
    model.replies = {
        "narrator": [recorded("narrator-zh-1")],
        "guide": [recorded("guide-zh-1")],
        "inventory/ledger": [recorded("inventory-ledger-zh-1")],
        "affinity/judge": [recorded("affinity-judge-zh-1")],
        "memory/extract": [recorded("memory-extract-zh-1a"), recorded("memory-extract-zh-1b")],
    }
    turn = await play(stub, session_id, TURN_ZH)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    assert all(r.status == resources_pb2.RUNTIME_STATUS_SUCCESS for r in turn.runtime_results if r.runtime_id != "memory/extract"), \
        [(r.runtime_id, r.reason) for r in turn.runtime_results]

    narrator = one(model.of("narrator"))
    assert narrator.system.startswith(preamble("narrator", "narrator", "Simplified Chinese"))
    assert prompt_body("narrator/PLUGIN.zh.md") in narrator.system
    assert narrator.system.endswith("叙事人称：第二人称。用“你”称呼玩家的角色。")
    for runtime_id, plugin_id, path in (("guide", "guide", "guide/PLUGIN.zh.md"),
                                        ("inventory/ledger", "inventory", "inventory/runtimes/ledger/RUNTIME.zh.md"),
                                        ("affinity/judge", "affinity", "affinity/runtimes/judge/RUNTIME.zh.md")):
        request = one(model.of(runtime_id))
        assert request.system.startswith(preamble(runtime_id, plugin_id, "Simplified Chinese") + "\n\n" + prompt_body(path)), runtime_id
        # A window of one turn or more reaches back to the opening on the first turn; the ledger's (maxTurns 0) does not.
        assert chat(request)[:-2] == ([] if runtime_id == "inventory/ledger" else [("assistant", OPENING_ZH)]) + [("user", TURN_ZH)]
        assert chat(request)[-1] == ("user", TASK_PROMPT) and chat(request)[-2][0] == "assistant"
    await wait_for_memories(store, session_id, 1)
    extract = one(model.of("memory/extract"))
    assert prompt_body("memory/runtimes/extract/RUNTIME.zh.md") in extract.system

    # Chinese names keep apart and map to the world's characters (the cast has Chinese aliases).
    items = await data(store, session_id, "inventory", "items")
    key = next(k for k, v in items.items() if v["name"] == "生锈的钥匙")
    assert key.startswith("item-") and items[key]["quantity"] == 1 and len(items) == 4
    scores = await data(store, session_id, "affinity", "scores")
    assert scores["tobin"]["name"] == "Old Tobin" and scores["tobin"]["score"] == 2
    assert results(turn)["dice-check/roller"].output == to_struct({"checks": []}), "拿起 / 感谢 risk nothing"


async def test_answers_that_break_the_schema_fail_their_runtime_and_commit_nothing(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub, store=store)
    model.requests.clear()
    model.replies = {**ENGLISH, "affinity/judge": [recorded("affinity-judge-bad-delta")], "guide": [recorded("guide-bad-prose")],
                     "memory/extract": [recorded("memory-extract-bad-record"), recorded("memory-extract-en-1b")]}
    turn = await play(stub, session_id, TURN_1)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, "a helper's bad answer does not stop the story"
    ran = results(turn)
    assert ran["affinity/judge"].status == resources_pb2.RUNTIME_STATUS_FAILED and "/changes/0/delta" in ran["affinity/judge"].reason, ran["affinity/judge"].reason
    assert ran["affinity/apply"].status == resources_pb2.RUNTIME_STATUS_SKIPPED
    assert ran["guide"].status == resources_pb2.RUNTIME_STATUS_FAILED and "not JSON" in ran["guide"].reason, ran["guide"].reason
    assert len(model.of("affinity/judge")) >= 2, "the kernel asked the model to repair its answer first"
    assert await data(store, session_id, "affinity", "scores") == {}
    assert ran["inventory/apply"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, "the other plugins' data still commits"
    # memory: the tool refused the bad record (invalid-input back to the model); nothing was saved.
    for _ in range(300):
        if len(model.of("memory/extract")) >= 2:
            break
        await asyncio.sleep(0.1)
    # The detached job runs at least once: under load a worker whose job lease lapsed may run it again (same replies).
    refused = json.loads(next(r for r in model.of("memory/extract") if r.step == 1).body["messages"][-1]["content"])
    assert refused["ok"] is False and refused["error"]["code"] == "invalid-input" and "value/kind" in refused["error"]["message"]
    await asyncio.sleep(0.5)
    assert await data(store, session_id, "memory", "memories") == {}


async def test_an_empty_story_answer_fails_the_turn_and_nothing_commits(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub, store=store)
    model.requests.clear()
    model.replies = {**ENGLISH, "narrator": [recorded("narrator-bad-empty")]}
    turn = await play(stub, session_id, TURN_1)
    assert turn.status == store_pb2.TURN_STATUS_FAILED, (turn.status, turn.abort_reason)
    assert "narrator" in turn.abort_reason
    for plugin, namespace in (("inventory", "items"), ("world-time", "clock"), ("affinity", "scores"), ("dice-check", "tally")):
        assert await data(store, session_id, plugin, namespace) == {}, (plugin, namespace)


async def test_a_model_cannot_emit_dice_the_roller_did_not_roll(stack) -> None:
    """With COVEL_RANDOM_SEED=recorded the roller's d20 on turn 1 is a 17 (DC 11: a success). The
    narrator first claims a 4 (consistent in itself, but invented): dice-check's PreToolUse hook
    refuses it and tells the model the turn's real roll; the model then repeats the real roll,
    which passes, and the recorder counts the roll once."""
    model, stub, store = stack
    session_id = await new_session(stub, store=store)
    model.requests.clear()
    model.replies = {**ENGLISH, "narrator": [recorded("narrator-en-dice-a"), recorded("narrator-en-dice-b"), recorded("narrator-en-dice-c")]}
    turn = await play(stub, session_id, "I climb the wall of the inn.")
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    [rolled] = from_struct(results(turn)["dice-check/roller"].output)["checks"]
    assert (rolled["roll"], rolled["outcome"]) == (17, "success")
    assert inputs_of(one(model.of("narrator")))["check"] == {"value": {"checks": [rolled]}}

    refused = one(model.of("narrator"), step=1).body["messages"][-1]
    assert refused["tool_call_id"] == "call_Emit1"
    answer = json.loads(refused["content"])
    assert answer["ok"] is False and answer["error"]["code"] == "refused"
    assert "rolled no athletics check of 4+0 against DC 11" in answer["error"]["message"]
    assert "This turn's rolls: athletics 17+0 vs DC 11 → success" in answer["error"]["message"]
    accepted = json.loads(one(model.of("narrator"), step=2).body["messages"][-1]["content"])
    assert accepted == {"ok": True, "data": {"emitted": "dice-check.rolled"}}

    recorder = from_struct(results(turn)["dice-check/recorder"].output)
    assert recorder["recorded"] == ["t1-1"] and recorder.get("ignored") == ["narrator"]
    checks = await data(store, session_id, "dice-check", "checks")
    assert list(checks) == ["t1-1"] and checks["t1-1"]["roll"] == 17
    assert (await data(store, session_id, "dice-check", "tally"))["all"]["checks"] == 1
    await wait_for_memories(store, session_id, 2)


def usage_of(name: str) -> int:
    return recorded(name)["usage"]["total_tokens"]


async def test_cost_gate_counts_the_providers_usage_of_every_call(stack) -> None:
    """The recorded replies carry the provider's usage; cost-gate adds exactly those totals."""
    model, stub, store = stack
    request = scheduler_pb2.CreateSessionRequest(world_id=WORLD, excluded_plugins=[*SETUP_PLUGINS, *STORY_WORLD_PLUGINS])
    for plugin_id, values in {"cost-gate": {"softCapTokens": 10_000_000, "hardCapTokens": 5000}}.items():
        request.plugin_settings[plugin_id].CopyFrom(to_struct(values))
    await detached_jobs_done(store)
    session_id = (await stub.CreateSession(request)).session.id
    SESSIONS.append(session_id)
    model.requests.clear()
    model.replies = ENGLISH
    assert (await play(stub, session_id, TURN_1)).status == store_pb2.TURN_STATUS_COMMITTED
    await wait_for_memories(store, session_id, 2)
    for _ in range(300):  # the detached extraction's last call is counted when its hook returns
        if len(model.of("memory/extract")) == 2:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)
    spent = sum(usage_of(name) for name in ("narrator-en-1", "guide-en-1", "inventory-ledger-en-1a", "inventory-ledger-en-1b",
                                            "affinity-judge-en-1", "memory-extract-en-1a", "memory-extract-en-1b"))
    stopped = await play(stub, session_id, TURN_2)
    assert stopped.status == store_pb2.TURN_STATUS_ABORTED
    assert f"this session used {spent} tokens, past its hard cap of 5000" in stopped.abort_reason, (spent, stopped.abort_reason)


@pytest.mark.parametrize(("plugin_id", "values", "field", "description"), [
    ("cost-gate", {"hardCapTokens": "lots"}, "plugin_settings.cost-gate.hardCapTokens",
     "must be a whole number, not 'lots'; send a whole number or leave it out to use the default (400000)"),
    ("narrator", {"person": "first"}, "plugin_settings.narrator.person",
     "must be one of second, third, not 'first'; pick one of them or leave it out to use the default ('second')"),
])
async def test_a_setting_value_its_plugin_does_not_declare_is_refused_at_create_session(
        stack, plugin_id, values, field, description) -> None:
    """CreateSession checks setting values against contributes.settings: nothing is created, no model is called."""
    import grpc

    model, stub, store = stack
    request = scheduler_pb2.CreateSessionRequest(world_id=WORLD, excluded_plugins=[*SETUP_PLUGINS, *STORY_WORLD_PLUGINS])
    request.plugin_settings[plugin_id].CopyFrom(to_struct(values))
    model.requests.clear()
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.CreateSession(request)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == f"{field}: {description}"
    assert model.requests == [], "no model was called"


async def test_summaries_reach_the_story_and_the_guide_but_not_windowed_bookkeepers(stack) -> None:
    """After a compaction the story reads the summary; the guide's window (maxTurns 2,
    includeSummaries) reads it too; the ledger (maxTurns 0) and the judge (maxTurns 1, no
    includeSummaries) do not (spec: a limited window carries no summary unless it asks)."""
    model, stub, store = stack
    request = scheduler_pb2.CreateSessionRequest(world_id=WORLD, excluded_plugins=[*SETUP_PLUGINS, *STORY_WORLD_PLUGINS])
    for plugin_id, values in {"history-compaction": {"budgetChars": 200, "keepTurns": 1}}.items():
        request.plugin_settings[plugin_id].CopyFrom(to_struct(values))
    await detached_jobs_done(store)
    session_id = (await stub.CreateSession(request)).session.id
    SESSIONS.append(session_id)
    for replies, text in ((ENGLISH, TURN_1), (ENGLISH_2, TURN_2), (ENGLISH_2, "I ask Tobin about Hal Brennan's boat.")):
        model.requests.clear()
        model.replies = replies
        turn = await play(stub, session_id, text)
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
        for _ in range(300):  # this turn's detached extraction is done before the replies change
            if len(model.of("memory/extract")) >= 2:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)
    heading = "Summary of the story so far (earlier turns, compacted):\nThe player: " + TURN_1
    assert chat(one(model.of("narrator")))[0] == ("system", heading + " → The key is cold and crusted with salt when you lift it from the table.")
    assert chat(one(model.of("guide")))[0][1].startswith(heading), chat(one(model.of("guide")))
    assert not any(content.startswith("Summary of the story") for _, content in chat(one(model.of("inventory/ledger"))))
    assert not any(content.startswith("Summary of the story") for _, content in chat(one(model.of("affinity/judge")))), \
        chat(one(model.of("affinity/judge")))
