"""story-events in process: its conditions (normalised, decided three-valued to any depth), its runtimes
through the kernel's function runner (intake's catalogue, evaluate's firing and records, plot's guard), the
fixture world's events played turn by turn, the world checks a bad event file gets, and the scripted
model's plan. No services (tests/e2e/test_builtin_story_events.py plays it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import MappingProxyType, SimpleNamespace

import jsonschema
import pytest
import yaml

from services.gateway.chat import Message
from services.gateway.providers.scripted.story_replies import structured_reply
from services.registry.loaded_world import WorldState
from services.registry.package_loader import load_package
from services.registry.world_loader import load_world
from services.scheduler.execution.plugin_data_view import PluginDataView
from services.scheduler.function.runtime import FunctionContext, run_function
from shared.plugin_code import PluginFile
from shared.plugin_code.loader import load_module
from shared.plugin_sdk import CancellationSignal
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.settings import REPO_ROOT

PLUGIN = REPO_ROOT / "plugins" / "story-events"
WORLD = REPO_ROOT / "tests" / "fixtures" / "living-worlds" / "bellwater"
EVENTS = {event["id"]: event for event in yaml.safe_load((WORLD / "data" / "events.yaml").read_text(encoding="utf-8"))}
DIMENSIONS = {"lamp": "lit", "weather": {"storm": 1, "wind": "breeze"}}


def _lib(name: str):
    """A module of the plugin's lib/, imported the way the kernel imports the package's code."""
    return load_module(PluginFile("story-events", PLUGIN, f"lib/{name}.py"))


conditions, events = _lib("conditions"), _lib("events")


def world(dimensions: dict | None = None) -> SimpleNamespace:
    frozen = {key: MappingProxyType({"name": key, "value": value, "version": 1}) for key, value in (DIMENSIONS if dimensions is None else dimensions).items()}
    return SimpleNamespace(dimensions=MappingProxyType(frozen))


def ctx(runtime: str, *, data: dict | None = None, message: str = "", actions: tuple = (), inputs: dict | None = None,
        settings: dict | None = None, turn: int = 1, dimensions: dict | None = None) -> FunctionContext:
    committed = dict(data or {})

    async def load(namespace):
        return {k: v for k, v in committed.items() if namespace is None or k[0] == namespace}

    return FunctionContext(
        runtime_id=f"story-events/{runtime}", plugin_id="story-events", inputs=MappingProxyType(inputs or {}), player_message=message,
        player_actions=actions, logical_turn=turn, execution=MappingProxyType({"origin": "player", "locale": "en"}), recursion_depth=0,
        random=SeededRandom("test"), plugin_data=PluginDataView("story-events", load), signal=CancellationSignal(),
        user_settings=MappingProxyType(settings or {}), world=world(dimensions),
    )


async def run(runtime: str, context: FunctionContext, entry: str = "handler"):
    [compiled] = [r.compiled for r in load_package(PLUGIN, source="builtin").runtimes if r.runtime_id == f"story-events/{runtime}"]
    module = compiled.function_part.handler if entry == "handler" else compiled.guard
    return await run_function(context, PluginFile("story-events", PLUGIN, module), 5000, entry=entry)


def writes(outcome) -> dict[tuple[str, str], object]:
    """{(namespace, key): value or None for a delete} of a run's plugin-data writes."""
    out = {}
    for write in outcome.writes:
        payload = write["payload"]
        out[(payload["namespace"], payload["key"])] = None if write["type"] == "plugin.data.delete" else payload.get("value")
    return out


def hidden_events(source: dict | None = None) -> dict:
    return {("_hidden.events", key): value for key, value in (source or EVENTS).items()}


# ---- conditions ---------------------------------------------------------------------------------

def normal(node, dimensions=("lamp", "weather"), known=("a", "b")):
    return conditions.normalise(node, dimensions=dimensions, events=known)


def test_conditions_nest_to_any_depth_and_decide_three_valued() -> None:
    deep = {"dimension": "lamp", "equals": "lit"}
    for _ in range(10):
        deep = {"not": {"any": [{"all": [deep]}]}}
    node = normal(deep)
    facts = conditions.Facts(turn=1, dimensions={"lamp": "lit"})
    assert conditions.decide(node, facts) is True, "ten nots: the leaf as it is"
    assert conditions.decide(normal({"not": {"dimension": "lamp", "equals": "lit"}}), facts) is False
    missing = conditions.Facts(turn=1, dimensions={})
    why: list[str] = []
    assert conditions.decide(normal({"not": {"dimension": "lamp", "equals": "lit"}}), missing, why) is None, "not keeps UNKNOWN"
    assert why == ["the session has no dimension lamp"]
    assert conditions.decide(normal({"any": [{"dimension": "lamp", "equals": "lit"}, {"turn": {"gte": 1}}]}), missing) is True
    assert conditions.decide(normal({"all": [{"dimension": "lamp", "equals": "lit"}, {"turn": {"gte": 2}}]}), missing) is False
    assert conditions.decide(normal({"all": [{"dimension": "lamp", "equals": "lit"}, {"turn": {"gte": 1}}]}), missing) is None


def test_leaves_read_paths_turns_flags_fired_words_and_kinds() -> None:
    facts = conditions.Facts(turn=6, dimensions={"weather": {"storm": 4, "wind": "gale"}}, time={"day": 2, "hour": 23, "period": "night"},
                             flags=frozenset({"letter"}), fired={"a": 2}, said="i read the lenses, 然后看信", kinds=frozenset({"demo-world/ask"}))
    holds = {
        "path": {"dimension": "weather", "path": "storm", "gte": 4},
        "path list": {"dimension": "weather", "path": ["wind"], "in": ["gale", "calm"]},
        "missing path, exists false": {"dimension": "weather", "path": "rain", "exists": False},
        "time": {"time": "hour", "gte": 22},
        "turn": {"turn": {"gte": 6, "lte": 6}},
        "flag": {"flag": "letter"},
        "fired since": {"fired": "a", "turnsSince": {"gte": 4}},
        "word start": {"said": "lens"},
        "chinese": {"said": ["信"]},
        "kind": {"action": "demo-world/ask"},
    }
    fails = {
        "other value": {"dimension": "weather", "path": "wind", "notEquals": "gale"},
        "not yet": {"fired": "a", "turnsSince": {"gte": 5}},
        "never fired": {"fired": "b"},
        "mid-word": {"said": "ens"},
        "unset flag": {"flag": "bell"},
        "string is not a number": {"dimension": "weather", "path": "wind", "gt": 1},
    }
    for name, node in holds.items():
        assert conditions.decide(normal(node), facts) is True, name
    for name, node in fails.items():
        assert conditions.decide(normal(node), facts) is False, name
    assert conditions.decide(normal({"dimension": "weather", "path": "rain", "equals": 1}), facts) is None, "no such place: UNKNOWN"
    assert conditions.decide(normal({"time": "hour", "gte": 1}), conditions.Facts(turn=1)) is None, "no story clock: UNKNOWN"


@pytest.mark.parametrize(("node", "where", "words"), [
    ({"dimension": "lamp", "equals": "lit", "gte": 1}, "when", "exactly one operator"),
    ({"dimension": "lamp"}, "when", "exactly one operator"),
    ({"dimension": "tide", "equals": 1}, "when.dimension", "no dimension 'tide'"),
    ({"all": [{"turn": {"gte": 1}}, {"fired": "nobody"}]}, "when.all[1].fired", "no event 'nobody'"),
    ({"any": []}, "when.any", "non-empty list"),
    ({"not": {"flag": "x", "said": "y"}}, "when.not", "exactly one of"),
    ({"turn": {"after": 3}}, "when.turn", "unexpected after"),
    ({"dimension": "lamp", "in": "lit"}, "when.in", "a list"),
    ({"time": "season", "equals": "winter"}, "when.time", "one of day"),
    ({"said": []}, "when.said", "non-empty"),
])
def test_a_condition_that_cannot_mean_anything_names_its_place(node, where, words) -> None:
    with pytest.raises(conditions.ConditionError) as error:
        normal(node)
    assert error.value.where == where and words in str(error.value)


def test_depth_is_bounded() -> None:
    node = {"flag": "x"}
    for _ in range(conditions.MAX_DEPTH + 1):
        node = {"not": node}
    with pytest.raises(conditions.ConditionError, match="nest at most"):
        normal(node)


# ---- intake -------------------------------------------------------------------------------------

async def test_intake_builds_the_catalogue_once_and_keeps_out_a_broken_event() -> None:
    outcome = await run("intake", ctx("intake", data=hidden_events()))
    assert outcome.status == "success", outcome.reason
    assert outcome.output == {"events": 4, "invalid": 1, "rebuilt": True}, "counts only: the output carries no event text"
    written = writes(outcome)
    assert sorted(key for (ns, key) in written if ns == "_hidden.catalog") == ["drowned-bell", "ferry-arrives", "gale-warning", "letter-read"]
    ferry = written[("_hidden.catalog", "ferry-arrives")]
    assert ferry["once"] is True and ferry["cooldownTurns"] == 0 and ferry["sets"] == ["letter-delivered"] and ferry["clears"] == []
    assert ferry["when"] == {"all": [{"turn": {"gte": 2}}, {"dimension": "lamp", "equals": "lit"}]}
    assert written[("_hidden.catalog", "letter-read")]["when"]["all"][1] == {"said": ["letter", "seal", "信", "封蜡"]}
    status = written[("_hidden.intake", "status")]
    assert status["invalid"] == [{"id": "broken-chain", "field": "when.fired", "problem": "no event 'no-such-event' is declared"}]
    assert all(namespace.startswith("_hidden.") for namespace, _ in written), "nothing public"

    # The next turn, nothing changed: nothing is written.
    again = await run("intake", ctx("intake", data={**hidden_events(), **written}))
    assert again.status == "success" and again.writes == [] and again.output["rebuilt"] is False


async def test_intake_refuses_events_that_arrived_public_and_writes_nothing() -> None:
    outcome = await run("intake", ctx("intake", data={("events", "ferry-arrives"): EVENTS["ferry-arrives"]}))
    assert outcome.status == "failed" and "visibility: hidden" in outcome.reason and outcome.writes == []


async def test_intake_rebuilds_when_the_worlds_dimensions_change() -> None:
    first = await run("intake", ctx("intake", data=hidden_events()))
    stored = {k: v for k, v in writes(first).items() if v is not None}
    without = await run("intake", ctx("intake", data={**hidden_events(), **stored}, dimensions={"lamp": "lit"}))
    assert without.output["rebuilt"] is True
    status = writes(without)[("_hidden.intake", "status")]
    assert {item["id"] for item in status["invalid"]} == {"broken-chain", "gale-warning", "drowned-bell"}
    assert writes(without)[("_hidden.catalog", "gale-warning")] is None, "an event that no longer fits leaves the catalogue"


# ---- evaluate -----------------------------------------------------------------------------------

async def catalogue() -> dict:
    outcome = await run("intake", ctx("intake", data=hidden_events()))
    return {key: value for key, value in writes(outcome).items() if key[0] == "_hidden.catalog"}


async def test_evaluate_fires_by_priority_records_the_fire_and_hands_the_story_only_its_cue() -> None:
    data = await catalogue()
    quiet = await run("evaluate", ctx("evaluate", data=data, message="I trim the wick.", turn=1))
    assert quiet.status == "success" and quiet.output == {"turn": 1, "events": []} and quiet.writes == []

    # Turn 2: the ferry (priority 5) and the gale (said "storm", priority 0) are both due; one per turn.
    fired = await run("evaluate", ctx("evaluate", data=data, message="A storm is coming.", turn=2))
    assert fired.output == {"turn": 2, "events": [{"id": "ferry-arrives", "title": "The early ferry", "cue": EVENTS["ferry-arrives"]["cue"]}]}
    written = writes(fired)
    assert written[("fired", "ferry-arrives")] == {"id": "ferry-arrives", "title": "The early ferry", "count": 1, "firstTurn": 2, "lastTurn": 2}
    assert written[("_hidden.flags", "letter-delivered")] == {"by": "ferry-arrives", "turn": 2}
    text = json.dumps([fired.output, list(written.items())], ensure_ascii=False)
    for other in ("letter-read", "gale-warning", "drowned-bell"):
        assert EVENTS[other]["cue"] not in text and other not in text, "nothing of an event that did not fire"

    two = await run("evaluate", ctx("evaluate", data=data, message="A storm is coming.", turn=2, settings={"maxPerTurn": 2}))
    assert [event["id"] for event in two.output["events"]] == ["ferry-arrives", "gale-warning"]


async def test_a_once_event_never_fires_twice_and_a_repeatable_one_waits_its_cooldown() -> None:
    data = {**await catalogue(), ("fired", "ferry-arrives"): {"id": "ferry-arrives", "count": 1, "firstTurn": 2, "lastTurn": 2},
            ("_hidden.flags", "letter-delivered"): {"by": "ferry-arrives", "turn": 2}}
    later = await run("evaluate", ctx("evaluate", data=data, message="I wait.", turn=3))
    assert later.output["events"] == [], "the ferry came once"
    letter = await run("evaluate", ctx("evaluate", data=data, message="I break the seal.", turn=3))
    assert [e["id"] for e in letter.output["events"]] == ["letter-read"], "the flag the ferry set, and the player's words"

    gale = {**data, ("fired", "gale-warning"): {"id": "gale-warning", "count": 1, "firstTurn": 4, "lastTurn": 4}}
    for turn, fires in ((5, False), (6, False), (7, True)):
        outcome = await run("evaluate", ctx("evaluate", data=gale, message="The gale!", turn=turn))
        assert bool(outcome.output["events"]) is fires, turn
    counted = writes(await run("evaluate", ctx("evaluate", data=gale, message="The gale!", turn=7)))
    assert counted[("fired", "gale-warning")] == {"id": "gale-warning", "title": "The wind rises", "count": 2, "firstTurn": 4, "lastTurn": 7}


async def test_evaluate_reads_the_dimensions_the_clock_and_the_players_action_kinds() -> None:
    data = await catalogue()
    storm = await run("evaluate", ctx("evaluate", data=data, turn=1, dimensions={"lamp": "dark", "weather": {"storm": 4, "wind": "gale"}}))
    assert [e["id"] for e in storm.output["events"]] == ["gale-warning"], "a dimension's value deep in its object"
    dark = await run("evaluate", ctx("evaluate", data=data, turn=3, dimensions={"lamp": "dark", "weather": {"storm": 1, "wind": "calm"}}))
    assert dark.output["events"] == [], "the ferry needs the lamp lit"

    night = {("_hidden.catalog", "night"): {"id": "night", "cue": "An owl.", "when": {"all": [{"time": "hour", "gte": 22}, {"action": ["demo-world/ask"]}]},
                                            "once": True, "cooldownTurns": 0, "priority": 0, "sets": [], "clears": []}}
    asked = ({"kind": "demo-world/ask", "text": "", "fields": {"topic": "owls"}},)
    clock = {"time": {"value": {"day": 1, "time": "23:10", "period": "night", "minutes": 1390}}}
    assert (await run("evaluate", ctx("evaluate", data=night, actions=asked, inputs=clock))).output["events"][0]["id"] == "night"
    without = await run("evaluate", ctx("evaluate", data=night, actions=asked))
    assert without.output["events"] == [] and writes(without)[("_hidden.intake", "undecided")] == ["the session has no story clock (world-time-context@1)"]


async def test_the_fixture_worlds_events_over_five_turns() -> None:
    """What the e2e test plays, decided in process: the catalogue, then each turn's evaluate on the data so far."""
    data = dict(await catalogue())
    played = []
    for turn, words in enumerate(("I trim the wick.", "I look out at the harbour.", "I break the seal of the letter.",
                                  "A storm is coming, I can feel it.", "The storm again."), start=1):
        outcome = await run("evaluate", ctx("evaluate", data=data, message=words, turn=turn))
        assert outcome.status == "success", outcome.reason
        played.append([e["id"] for e in outcome.output["events"]])
        for (namespace, key), value in writes(outcome).items():
            if value is None:
                data.pop((namespace, key), None)
            else:
                data[(namespace, key)] = value
    assert played == [[], ["ferry-arrives"], ["letter-read"], ["gale-warning"], []]
    assert sorted(key for ns, key in data if ns == "fired") == ["ferry-arrives", "gale-warning", "letter-read"]


# ---- plot ---------------------------------------------------------------------------------------

async def test_plot_skips_with_the_empty_plan_when_nothing_fired_or_the_planner_is_off() -> None:
    nothing = await run("plot", ctx("plot", inputs={"cue": {"value": {"turn": 1, "events": []}}}), entry="guard")
    assert nothing.output == {"skip": True, "events": []}
    cue = {"cue": {"value": {"turn": 2, "events": [{"id": "ferry-arrives", "cue": "A ferry."}]}}}
    off = await run("plot", ctx("plot", inputs=cue, settings={"planner": False}), entry="guard")
    assert off.output == {"skip": True, "events": []}
    on = await run("plot", ctx("plot", inputs=cue), entry="guard")
    assert on.status == "success" and on.output == {}, "the model plans"


def test_the_scripted_plan_follows_the_cue_and_fits_the_contract() -> None:
    schema = json.loads((PLUGIN / "schemas" / "plan.schema.json").read_text())
    cue = {"turn": 2, "events": [{"id": "ferry-arrives", "title": "The early ferry", "cue": EVENTS["ferry-arrives"]["cue"]}]}
    system = f"You plan how hidden plot events enter.\n<runtime-inputs>\n{json.dumps({'cue': {'value': cue}})}\n</runtime-inputs>"
    plan = structured_reply("story-event-plan-1", schema, [Message(role="system", content=system), Message(role="user", content="I look out at the harbour.")],
                            "I look out at the harbour.", "seed")
    jsonschema.validate(plan, schema)
    [one] = plan["events"]
    assert one["id"] == "ferry-arrives" and "Ysolde" in one["characters"] and "look out at the harbour" in one["entrance"]
    assert " ".join(one["beats"]) == EVENTS["ferry-arrives"]["cue"], "every fact of the cue, nothing more"
    empty = structured_reply("story-event-plan-1", schema, [Message(role="system", content="no inputs")], "", "seed")
    assert empty == {"events": []}


# ---- the world's side -----------------------------------------------------------------------------

def test_the_fixture_world_loads_and_a_public_or_broken_event_file_fails_it(tmp_path: Path) -> None:
    packages = [load_package(PLUGIN, source="builtin"), load_package(REPO_ROOT / "plugins" / "living-world-rules", source="builtin")]
    loaded = load_world(WORLD, packages)
    assert loaded.state is WorldState.LOADED, [str(d) for d in loaded.diagnostics]
    broken = Path(shutil.copytree(WORLD, tmp_path / "bellwater"))
    (broken / "world.yaml").write_text((broken / "world.yaml").read_text().replace("    visibility: hidden\n", ""))
    events_file = broken / "data" / "events.yaml"
    events_file.write_text(events_file.read_text().replace("equals: lit", "equals: blazing").replace("priority: 5", "priority: high"))
    codes = {(d.code, d.field_path.split(".")[0]) for d in load_world(broken, packages).diagnostics if d.is_error}
    assert ("data-dataset-refuses", "data[0]") in codes, "events sent as public data: the world does not load"
    assert ("dimension-reference", "[0]") in codes, "a value the dimension cannot take"
    assert "data-record-invalid" in {code for code, _ in codes}, "a priority that is not a number"


async def test_the_players_words_include_action_texts_and_fields() -> None:
    data = {**await catalogue(), ("_hidden.flags", "letter-delivered"): {"by": "ferry-arrives", "turn": 2},
            ("fired", "ferry-arrives"): {"id": "ferry-arrives", "count": 1, "firstTurn": 2, "lastTurn": 2}}
    asked = ({"kind": "demo-world/ask", "text": "", "fields": {"topic": "the black SEAL", "whom": "Ysolde"}},)
    outcome = await run("evaluate", ctx("evaluate", data=data, actions=asked, turn=3))
    assert [e["id"] for e in outcome.output["events"]] == ["letter-read"]
    chinese = await run("evaluate", ctx("evaluate", data=data, message="我拆开那封信。", turn=3))
    assert [e["id"] for e in chinese.output["events"]] == ["letter-read"], "a Chinese word anywhere in the words"


def test_the_scripted_plan_of_a_chinese_cue() -> None:
    schema = json.loads((PLUGIN / "schemas" / "plan.schema.json").read_text())
    cue = {"turn": 2, "events": [{"id": "ferry-arrives", "cue": "伊索尔德的渡船从雾里出来，撞上栈桥。她把一封信交给看守人。"}]}
    system = f"你负责策划。\n<runtime-inputs>\n{json.dumps({'cue': {'value': cue}}, ensure_ascii=False)}\n</runtime-inputs>"
    plan = structured_reply("story-event-plan-1", schema, [Message(role="system", content=system)], "我望向港口。", "seed")
    jsonschema.validate(plan, schema)
    assert plan["events"][0]["beats"] == ["伊索尔德的渡船从雾里出来，撞上栈桥。", "她把一封信交给看守人。"]
    assert plan["events"][0]["entrance"].startswith("就在玩家说完“我望向港口”之后")
