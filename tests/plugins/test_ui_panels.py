"""Plugin UI panels (shared/ui_panels.py): the checks a view passes at load, its bindings, its text rendering,
and the builtin plugins' own panels drawn from state like ListPanels gives."""

from __future__ import annotations

import json

import pytest

from shared import ui_panel_specs, ui_panels
from shared.settings import REPO_ROOT

STATE = {"data": {"items": {"rusty-key": {"name": "rusty key", "quantity": 1}, "brass-lantern": {"name": "brass lantern", "quantity": 1}},
                  "clock": {"now": {"minutes": 1190, "day": 1, "time": "19:50", "period": "dusk"}}},
         "world": {"protagonist": {"name": "Wren", "description": "A lamp-maker.", "attributes": {"courage": 4, "role": "a lamp-maker"}},
                   "dimensions": {"lighthouse": "dark"}},
         "session": {"phase": "playing", "completedPlayerTurns": 2, "locale": "en"}}


@pytest.mark.parametrize(("spec", "problem"), [
    ({"webview": {"src": "./page.html", "sandbox": ["allow-scripts", "allow-same-origin"]}}, "would let the page leave its sandbox"),
    ({"webview": {"src": "./page.html", "sandbox": ["allow-everything"]}}, "not an iframe sandbox token"),
    ({"webview": {"src": "./page.js"}}, "the path of an .html page"),
    ({"webview": "./page.html", "view": {"type": "text", "text": "x"}}, "exactly one of `view` or `webview`"),
    ({"label": "Standing"}, "exactly one of `view` or `webview`"),
    ({"id": "a b", "view": {"type": "text", "text": "x"}}, "letters, digits"),
    ({"groupOrder": "second", "view": {"type": "text", "text": "x"}}, "a whole number"),
    ({"dataSource": "scores", "view": {"type": "text", "text": "x"}}, "an object with one key, `namespace`"),
    ({"emptyState": {"message": ""}, "view": {"type": "text", "text": "x"}}, "text of 1 to 200 characters"),
    ({"colour": "red", "view": {"type": "text", "text": "x"}}, "a panel spec takes no `colour`"),
    ({"view": {"type": "marquee"}}, "'marquee' is not a component"),
    ({"view": {"type": "text", "text": "x", "colour": "red"}}, "`text` takes no `colour`"),
    ({"view": {"type": "text", "text": "{{ $item.name }}"}}, "only drawn inside a `list`"),
    ({"view": {"type": "text", "text": "{{ data.items }}"}}, "write a JSON pointer"),
    ({"view": {"type": "list", "repeat": {"statePath": "items"}}}, "a JSON pointer into the panel's state"),
    ({"view": {"type": "badge", "text": "x", "tone": "loud"}}, "one of neutral, good, bad, warning"),
    ({"view": {"type": "stack", "children": "none"}}, "a list of nodes"),
])
def test_a_view_that_cannot_be_drawn_is_refused_naming_where(spec, problem) -> None:
    problems = ui_panel_specs.check_spec(spec)
    assert problems and any(problem in text for _, text in problems), problems


def test_a_deep_or_huge_view_is_refused() -> None:
    deep: dict = {"type": "text", "text": "x"}
    for _ in range(12):
        deep = {"type": "stack", "children": [deep]}
    assert any("nested at most" in text for _, text in ui_panel_specs.check_spec({"view": deep}))
    wide = {"type": "stack", "children": [{"type": "text", "text": "x"}] * 250}
    assert any("at most 200 nodes" in text for _, text in ui_panel_specs.check_spec({"view": wide}))


def test_bindings_read_pointers_items_and_keys_and_leave_missing_values_empty() -> None:
    assert ui_panels.bind("Day {{ /data/clock/now/day }}, {{/data/clock/now/time}}", STATE) == "Day 1, 19:50"
    assert ui_panels.bind("{{ /data/nothing/here }}!", STATE) == "!"
    assert ui_panels.bind("{{ $key }}: {{ $item.name }}", STATE, {"name": "key"}, "k1") == "k1: key"
    assert ui_panels.items_at(STATE, "/world/protagonist/attributes") == [("courage", 4), ("role", "a lamp-maker")]


@pytest.mark.parametrize(("plugin", "lines"), [
    ("inventory", ["Inventory", "brass lantern ×1", "rusty key ×1"]),
    ("world-time", ["Story time", "Day 1, 19:50 (dusk)"]),
    ("char-creator", ["Character", "Wren", "A lamp-maker.", "courage: 4", "role: a lamp-maker"]),
    ("affinity", ["Standing", "Nobody has made up their mind about you yet."]),
    ("dice-check", ["Dice", "No risky action yet."]),
])
def test_the_builtin_panels_pass_their_checks_and_draw_their_state(plugin, lines) -> None:
    spec = json.loads((REPO_ROOT / "plugins" / plugin / "ui" / "right.json").read_text(encoding="utf-8"))
    assert ui_panel_specs.check_spec(spec) == []
    assert ui_panels.render_text(spec, STATE) == lines


COVEL_PANEL = {"id": "standing", "group": "people", "label": "Standing", "shortLabel": "Std", "icon": "heart", "groupOrder": 2,
               "dataSource": {"namespace": "items"}, "emptyState": {"message": "Nothing carried."},
               "view": {"type": "list", "repeat": {"statePath": "/data/items"}, "children": [{"type": "text", "text": "{{ $item.name }}"}]}}


def test_a_panel_in_covels_shape_passes_and_draws_its_empty_state_while_its_namespace_is_empty() -> None:
    assert ui_panel_specs.check_spec(COVEL_PANEL) == []
    assert ui_panels.render_text(COVEL_PANEL, STATE) == ["brass lantern", "rusty key"]
    empty = {**STATE, "data": {"items": {}}}
    assert ui_panels.render_text(COVEL_PANEL, empty) == ["Standing", "Nothing carried."]


def test_a_webview_panel_passes_and_a_text_client_shows_its_placeholder() -> None:
    spec = {"id": "map", "label": "Map", "webview": {"src": "./map.html", "sandbox": ["allow-scripts", "allow-forms"]}}
    assert ui_panel_specs.check_spec(spec) == [] and ui_panel_specs.check_spec({"webview": "./map.html"}) == []
    assert ui_panel_specs.webview_of(spec) == ("./map.html", ("allow-scripts", "allow-forms"))
    assert ui_panels.render_text(spec, STATE) == ["Map", ui_panels.WEBVIEW_PLACEHOLDER]
