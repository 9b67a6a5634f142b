"""The world in prompts: templates filled from the world the turn found (services/scheduler/agent/prompt_templates.py)
and the builtin dimension tools that read the same frozen snapshot (dimension_tools.py)."""

from __future__ import annotations

import json

from google.protobuf import struct_pb2

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.agent.dimension_tools import add_dimension_tools, add_update_dimensions, dimension_snapshot
from services.scheduler.agent.prompt_templates import render, template_values
from services.scheduler.execution.kernel_tools import KernelTools
from shared.structs import to_struct, to_value


def world() -> store_pb2.GetWorldResponse:
    return store_pb2.GetWorldResponse(
        character_schema=to_struct({"types": ["player", "npc"], "attributes": {"courage": {"type": "integer"}}}),
        characters=[store_pb2.Character(id="mira", data=to_struct({"name": "Mira", "type": "npc", "description": "The harbor-master."})),
                    store_pb2.Character(id="you", data=to_struct({"name": "The traveller", "type": "player"}))],
        dimensions=[store_pb2.Dimension(id="lighthouse", name="The lighthouse", schema=to_struct({"enum": ["dark", "lit"]}),
                                        value=to_value("dark"), version=3),
                    store_pb2.Dimension(id="tide", name="Tide", schema=to_struct({"type": "object"}), value=to_value({"level": "low"}),
                                        version=1)],
    )


def test_placeholders_are_filled_from_the_world() -> None:
    values = template_values(world())
    text = ("The lamp is {{ world.dimensions.lighthouse.value }} ({{world.dimensions.lighthouse.name}}); tide {{ world.dimensions.tide.value }}.\n"
            "People:\n{{ characters.npcs }}\nYou: {{ characters.players }}\nSchema: {{ world.schema }}")
    assert render(text, values) == (
        'The lamp is dark (The lighthouse); tide {"level": "low"}.\nPeople:\n- Mira: The harbor-master.\nYou: - The traveller\n'
        'Schema: {"attributes": {"courage": {"type": "integer"}}, "types": ["player", "npc"]}')


def test_what_names_nothing_stays_as_written() -> None:
    values = template_values(world())
    text = "{{ world.dimensions.moon.value }} {{ player.name }} {{ world.dimensions.tide.value.level }} {literal}"
    assert render(text, values) == '{{ world.dimensions.moon.value }} {{ player.name }} low {literal}'
    assert render("{{ world.schema }}", template_values(None)) == "{{ world.schema }}"


async def test_the_dimension_tools_read_the_frozen_snapshot() -> None:
    tools = KernelTools()
    snapshot = dimension_snapshot(world())
    add_dimension_tools(tools, snapshot)
    snapshot["lighthouse"]["value"] = "lit"  # a later change of the caller's copy does not reach the tools
    listed = await tools.tools["world-dimension-list"].handler({})
    assert listed["ok"] and [(d["id"], d["value"], d["version"]) for d in listed["data"]["dimensions"]] == [
        ("lighthouse", "dark", 3), ("tide", {"level": "low"}, 1)]
    got = await tools.tools["world-dimension-get"].handler({"id": "lighthouse"})
    assert got["data"]["schema"] == {"enum": ["dark", "lit"]}
    missing = await tools.tools["world-dimension-get"].handler({"id": "moon"})
    assert missing["ok"] is False and missing["error"]["code"] == "not-found" and "lighthouse, tide" in missing["error"]["message"]
    empty = KernelTools()
    add_dimension_tools(empty, {})
    assert empty.names() == []
    json.dumps(listed)


def lore(entry_id: str, keys: list[str], content: str, **fields) -> store_pb2.LorebookEntry:
    return store_pb2.LorebookEntry(owner="world", id=entry_id, keys=keys, content=content, **fields)


class HookStateStore:
    """The store's AccessHookState, in memory (the real one: tests/e2e/test_imported_world.py)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str, str], struct_pb2.Value] = {}
        self.calls: list[str] = []

    async def AccessHookState(self, request: store_pb2.AccessHookStateRequest) -> store_pb2.AccessHookStateResponse:
        self.calls.append(request.op)
        where = (request.session_id, request.plugin_id, request.key)
        if request.op == "set":
            self.values[where] = request.value
        found = where in self.values
        return store_pb2.AccessHookStateResponse(found=found, value=self.values.get(where))


async def test_lorebook_entries_come_up_by_their_rules_in_their_places() -> None:
    from services.scheduler.agent.lorebook_turn import LorebookTurn
    rules = common_pb2.LorebookActivation
    entries = [lore("lamp", ["lamp"], "The lamp is brass."), lore("salt", [], "Salt everywhere.", constant=True),
               lore("ossa", ["Ossa"], "Ossa drowned; {{char}} knows.", title="Ossa"), lore("tower", ["灯塔"], "灯塔很老。"),
               lore("off", ["lamp"], "Never shown.", disabled=True),
               lore("after", ["lamp"], "After the cast.", activation=rules(position="afterChar")),
               lore("deep", ["lamp"], "Whispered.", activation=rules(position="atDepth", depth=1, has_depth=True, role="user"))]
    characters = [store_pb2.Character(id="lin", data=to_struct({"name": "Lin", "type": "npc"}))]
    world_response = store_pb2.GetWorldResponse(lorebook=entries, characters=characters)
    history = [common_pb2.Message(role="story", text="Ossa waits on the quay.")]
    store = HookStateStore()
    turn = LorebookTurn(store, "s1", 1, "narrator")  # type: ignore[arg-type]
    await turn.evaluate(world_response, history, "I light the LAMP near 灯塔")
    before, after = turn.segments("en")
    assert before[0]["content"].splitlines() == ["Lorebook (what this world knows; use what fits the scene):", "- The lamp is brass.",
                                                 "- Ossa: Ossa drowned; Lin knows.", "- Salt everywhere.", "- 灯塔很老。"]
    assert [(s["id"], s["position"], s.get("role")) for s in after] == [
        ("lorebook-after", "system", None), ("lorebook-depth-1-user", {"depth": 1}, "user")]
    trace = json.loads(turn.trace_entry().message)
    assert trace["turn"] == 1 and {e["id"]: e["why"] for e in trace["entries"]}["salt"] == "constant"
    quiet = LorebookTurn(store, "s1", 2, "narrator")  # type: ignore[arg-type]
    await quiet.evaluate(world_response, [], "lampshades everywhere")  # a spaced-script key is a whole word
    assert [e.id for e in quiet.activation.entries] == ["salt"]
    empty = LorebookTurn(store, "s1", 1, "narrator")  # type: ignore[arg-type]
    await empty.evaluate(store_pb2.GetWorldResponse(), [], "lamp")
    assert empty.segments("en") == ([], []) and empty.trace_entry() is None


async def test_memory_search_finds_lorebook_entries() -> None:
    from services.scheduler.agent.memory_search import lorebook_records, search_memory
    entries = [lore("lighthouse", ["lighthouse"], "Its lens was stolen three nights ago.", title="The lighthouse"),
               lore("gulls", ["gull"], "The gulls are never fed.")]
    found = await search_memory(lorebook_records(entries), "stolen lens", 5)
    hits = found["results"]
    assert found["method"] == "bm25"
    assert [(h["source"], h["owner"], h["id"]) for h in hits] == [("lorebook", "world", "lighthouse")]
    assert "lens" in hits[0]["text"]


async def test_update_dimensions_adds_the_versions_read_and_refuses_what_the_model_can_correct() -> None:
    tools = KernelTools()
    add_update_dimensions(tools, dimension_snapshot(world()))
    update = tools.tools["update-dimensions"].handler
    assert not tools.is_read_only("update-dimensions")
    refused = {
        "moon": await update({"updates": [{"id": "moon", "value": 1}]}),
        "schema": await update({"updates": [{"id": "lighthouse", "value": "burning"}]}),
        "twice": await update({"updates": [{"id": "tide", "value": {}}, {"id": "tide", "value": {}}]}),
        "no value": await update({"updates": [{"id": "tide"}]}),
        "shape": await update({"updates": "all of them"}),
    }
    assert {name: answer["error"]["code"] for name, answer in refused.items()} == {
        "moon": "not-found", "schema": "schema-violation", "twice": "invalid-input", "no value": "invalid-input", "shape": "invalid-input"}
    assert "'burning' is not one of" in refused["schema"]["error"]["message"] and tools.tool_writes == []
    assert (await update({"updates": [{"id": "lighthouse", "value": "lit"}]}))["data"] == {"settled": True, "updated": ["lighthouse"]}
    assert (await update({"updates": []}))["ok"]
    assert tools.tool_writes == [
        {"type": "dimension.update", "payload": {"updates": [{"id": "lighthouse", "value": "lit", "expectedVersion": 3}]}},
        {"type": "dimension.update", "payload": {"updates": []}},
    ]


async def test_timers_are_kept_per_logical_turn_and_only_for_timed_rules() -> None:
    from services.scheduler.agent.lorebook_turn import LorebookTurn
    timed = store_pb2.GetWorldResponse(lorebook=[lore("storm", ["storm"], "Six boats.", activation=common_pb2.LorebookActivation(sticky=1))])
    store = HookStateStore()

    async def up(turn: int, text: str) -> list[str]:
        run = LorebookTurn(store, "s1", turn, "narrator")  # type: ignore[arg-type]
        await run.evaluate(timed, [], text)
        return [entry.id for entry in run.activation.entries]

    assert await up(1, "a storm") == ["storm"]
    assert await up(2, "calm") == ["storm"]  # sticky
    assert await up(2, "calm") == ["storm"]  # the same turn run again starts from the same timers
    assert await up(3, "calm") == []
    untimed = HookStateStore()
    run = LorebookTurn(untimed, "s1", 1, "narrator")  # type: ignore[arg-type]
    await run.evaluate(store_pb2.GetWorldResponse(lorebook=[lore("salt", [], "Salt.", constant=True)]), [], "hi")
    assert untimed.calls == [] and [e.id for e in run.activation.entries] == ["salt"]
    assert store.calls == ["get", "set"] * 4
