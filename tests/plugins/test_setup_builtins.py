"""The core setup builtins' own code: world-init (schema-gen, dimension-context, dimension-clock, edit-dimensions),
char-creator (player-init, character-tracker) and pregame, run as the scheduler runs their handlers (tests/e2e/
test_setup_builtins.py plays them through the five services)."""

from __future__ import annotations

import importlib.util
from types import MappingProxyType

import pytest

from covel.store.v1 import store_pb2
from services.scheduler.execution.world_view import WorldView
from shared.structs import to_struct, to_value
from tests.plugins.test_builtin_plugins import PLUGINS, ctx, run

SCHEMA = {"types": ["player", "npc"], "attributes": {
    "role": {"name": "Role", "description": "What they do."},
    "courage": {"name": "Courage", "type": "integer", "min": 0, "max": 5}}}
PRESET = {"type": "player", "name": "The traveller", "description": "Off the evening coach.", "attributes": {"role": "a traveller", "courage": 3}}


def lib(plugin: str, module: str):
    spec = importlib.util.spec_from_file_location(f"{plugin}_{module}", PLUGINS / plugin / "lib" / f"{module}.py")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def world(*, schema: dict | None = SCHEMA, characters: dict | None = None, dimensions: dict | None = None, world_id: str = "saltmere",
          seat_character: str = "traveller") -> WorldView:
    found = store_pb2.GetWorldResponse()
    if schema is not None:
        found.character_schema.CopyFrom(to_struct(schema))
    for character_id, data in (characters if characters is not None else {"traveller": PRESET}).items():
        found.characters.append(store_pb2.Character(id=character_id, data=to_struct(data), version=1))
    for dimension_id, (schema_of, value, version) in (dimensions or {}).items():
        found.dimensions.append(store_pb2.Dimension(id=dimension_id, name=dimension_id, schema=to_struct(schema_of), value=to_value(value),
                                                    version=version))
    seats = [store_pb2.Seat(id="main", role="player", character_id=seat_character, character_ids=[seat_character])] if seat_character else []
    return WorldView(found, seats=seats, world_record={"id": world_id} if world_id else None)


def with_world(context, view: WorldView, *, answer: dict | None = None, locale: str = "en"):
    context.world = view
    context.execution = MappingProxyType({"origin": "player", "locale": locale})
    if answer is not None:
        context.player_actions = ({"kind": "say", "text": "", "interaction": {"id": "protagonist", "values": answer}},)
    return context


class Gateway:
    """ctx.gateway with one canned answer, keeping what it was asked."""

    def __init__(self, answer: dict) -> None:
        self.answer, self.asked = answer, []

    async def generate_object(self, prompt=None, *, schema, name="result", **_):
        self.asked.append({"prompt": prompt, "schema": schema, "name": name})
        return self.answer


# ---- world-init ---------------------------------------------------------------------------------

def _attributes(count: int) -> list[dict]:
    return [{"id": f"trait-{n}", "name": f"Trait {n}", "description": "", "type": "integer" if n % 2 else "text"} for n in range(count)]


def test_a_generated_character_schema_needs_fifteen_usable_attributes() -> None:
    generation = lib("world-init", "generation")
    made = generation.character_schema({"attributes": [*_attributes(15), {"id": "trait-1", "name": "again", "type": "text"}]})
    assert len(made["attributes"]) == 15 and made["types"] == ["player", "npc"], "a repeated id counts once"
    assert made["attributes"]["trait-1"] == {"name": "Trait 1", "description": "", "type": "integer", "min": 0, "max": 10}
    with pytest.raises(ValueError, match="14 usable attributes; at least 15"):
        generation.character_schema({"attributes": [*_attributes(14), {"id": "Bad Id", "name": "x", "type": "text"}]})


def test_generated_dimensions_skip_the_worlds_own_and_type_their_initial_value() -> None:
    made = lib("world-init", "generation").new_dimensions({"dimensions": [
        {"id": "tide", "name": "Tide", "description": "", "type": "text", "initial": "low"},
        {"id": "boats", "name": "Boats", "description": "", "type": "integer", "initial": "3"},
        {"id": "mood", "name": "Mood", "description": "", "type": "integer", "initial": "grim"}]}, {"tide": {}})
    assert [(d["id"], d["value"], d["schema"]["type"]) for d in made] == [("boats", 3, "integer"), ("mood", 0, "integer")]


async def test_schema_gen_proposes_the_schema_and_new_dimensions_it_generated() -> None:
    gateway = Gateway({"attributes": _attributes(16), "dimensions": [{"id": "season", "name": "Season", "description": "",
                                                                      "type": "text", "initial": "winter"}]})
    context = with_world(ctx("world-init", "world-init/schema-gen"), world(schema=None))
    context.gateway = gateway
    outcome = await run("world-init", "schema-gen", context)
    assert outcome.status == "success", outcome.reason
    assert outcome.output == {"success": True, "attributeCount": 16, "dimensionCount": 1, "worldSchema": outcome.output["worldSchema"]}
    assert [w["type"] for w in outcome.writes] == ["character.schema.set", "dimension.initialize"]
    assert gateway.asked[0]["schema"]["properties"]["attributes"]["minItems"] == 15 and "The traveller" in gateway.asked[0]["prompt"]


async def test_dimension_clock_derives_marked_dimensions_from_the_settled_clock() -> None:
    dimensions = {"daypart": ({"type": "string", "x-derive": "period"}, "dusk", 2), "day": ({"type": "integer", "x-derive": "day"}, 1, 1),
                  "tide": ({"type": "string"}, "low", 4)}
    time = {"before": {"day": 1, "time": "19:30", "period": "dusk"}, "after": {"day": 1, "time": "20:10", "period": "evening"},
            "elapsedMinutes": 40, "reason": "talk"}
    context = with_world(ctx("world-init", "world-init/dimension-clock", inputs={"time": {"value": time}}), world(dimensions=dimensions))
    outcome = await run("world-init", "dimension-clock", context)
    assert outcome.output == {"derived": ["daypart"]}, "day 1 is unchanged; tide is not derived"
    assert outcome.writes == [{"type": "dimension.update", "payload": {"updates": [{"id": "daypart", "value": "evening", "expectedVersion": 2}]}}]


async def test_edit_dimensions_checks_each_value_against_its_schema_and_writes_nothing_on_a_bad_one() -> None:
    dimensions = {"boats": ({"type": "integer", "minimum": 0}, 2, 3)}
    good = with_world(ctx("world-init", "world-init/edit-dimensions", activation={"updates": [{"id": "boats", "value": 1}]}), world(dimensions=dimensions))
    outcome = await run("world-init", "edit-dimensions", good)
    assert outcome.writes == [{"type": "dimension.update", "payload": {"updates": [{"id": "boats", "value": 1, "expectedVersion": 3}]}}]
    for updates, problem in (([{"id": "boats", "value": -1}], "payload.updates[0].value: -1 is less than the minimum of 0"),
                             ([{"id": "tide", "value": "x"}], "payload.updates[0].id: the world has no dimension"), ([], "payload.updates: give")):
        bad = with_world(ctx("world-init", "world-init/edit-dimensions", activation={"updates": updates}), world(dimensions=dimensions))
        outcome = await run("world-init", "edit-dimensions", bad)
        assert outcome.status == "failed" and problem in outcome.reason and outcome.writes == []


# ---- char-creator -------------------------------------------------------------------------------

async def test_player_init_asks_the_form_once_then_fills_the_character_field_by_field() -> None:
    asked = await run("char-creator", "player-init", with_world(ctx("char-creator", "char-creator/player-init"), world()))
    assert asked.status == "success" and asked.completion == "pending" and asked.output == {"created": False, "waiting": True}
    [form] = asked.shown["interactions"]
    fields = form["schema"]["properties"]
    assert list(fields) == ["name", "courage", "role"] and fields["name"]["default"] == "The traveller"
    assert fields["courage"] == {"title": "Courage", "description": "", "type": "integer", "minimum": 0, "maximum": 5, "default": 3}

    again = await run("char-creator", "player-init", with_world(ctx("char-creator", "char-creator/player-init",
                                                                    data={("protagonist", "asked"): {"interactionId": "protagonist"}}), world()))
    assert again.completion == "pending" and not again.shown.get("interactions"), "an open form is not asked twice"

    answered = await run("char-creator", "player-init", with_world(ctx("char-creator", "char-creator/player-init"), world(),
                                                                   answer={"name": "Wren", "courage": 4}))
    assert answered.completion == "done" and answered.output["characterId"] == "traveller"
    upsert = next(w for w in answered.writes if w["type"] == "character.upsert")["payload"]
    assert upsert["expectedVersion"] == 1 and upsert["character"]["name"] == "Wren"
    assert upsert["character"]["attributes"] == {"role": "a traveller", "courage": 4}, "unanswered fields keep the preset's"


async def test_player_init_fails_clearly_without_a_character_schema() -> None:
    outcome = await run("char-creator", "player-init", with_world(ctx("char-creator", "char-creator/player-init"), world(schema=None)))
    assert outcome.status == "failed" and "no characterSchema yet" in outcome.reason and outcome.writes == []


def test_character_tracker_keeps_only_changes_that_fit_the_schema() -> None:
    changes = lib("char-creator", "changes")
    held = changes.held_changes(SCHEMA, PRESET, [
        {"attribute": "courage", "value": 9, "why": "out of range"}, {"attribute": "courage", "value": 4, "why": "braved the cliff"},
        {"attribute": "luck", "value": 1, "why": "no such attribute"}, {"attribute": "role", "value": "a traveller", "why": "unchanged"}])
    assert held == [{"attribute": "courage", "value": 4, "why": "braved the cliff"}]


async def test_character_tracker_commits_the_changes_the_model_found() -> None:
    digest = {"playerMessage": "I climb the cliff.", "narrativeText": "You climb the cliff in the storm, unafraid."}
    context = with_world(ctx("char-creator", "char-creator/character-tracker", inputs={"digest": {"value": digest}},
                             data={("protagonist", "created"): {"characterId": "traveller"}}), world())
    context.gateway = Gateway({"changes": [{"attribute": "courage", "value": 5, "why": "climbed in a storm"}]})
    outcome = await run("char-creator", "character-tracker", context)
    assert outcome.output == {"changed": ["courage"]}
    assert [w["type"] for w in outcome.writes] == ["character.upsert", "plugin.data"]
    assert outcome.writes[0]["payload"]["character"]["attributes"]["courage"] == 5


# ---- pregame ------------------------------------------------------------------------------------

async def test_pregame_writes_the_opening_brief_once_the_character_is_made() -> None:
    made = {"value": {"created": True, "characterId": "traveller", "name": "Wren"}}
    view = world(characters={"traveller": {**PRESET, "name": "Wren"}})
    outcome = await run("pregame", "pregame", with_world(ctx("pregame", "pregame", inputs={"character": made}), view))
    assert outcome.completion is None and outcome.output["protagonist"]["name"] == "Wren"
    assert outcome.output["brief"].startswith("Open the story. Wren (Off the evening coach.) has just arrived")
    zh = await run("pregame", "pregame", with_world(ctx("pregame", "pregame", inputs={"character": made}), view, locale="zh"))
    assert zh.output["brief"].startswith("开始故事。Wren")

    waiting = {"value": {"created": False, "waiting": True}}
    outcome = await run("pregame", "pregame", with_world(ctx("pregame", "pregame", inputs={"character": waiting}), view))
    assert outcome.completion == "pending" and outcome.output["waiting"] is True
