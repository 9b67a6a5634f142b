"""What `covel play` shows: the story, then dice, inventory, affinity, time and the guide's
suggestions, /roll over gRPC (RunManual of dice-check/roll), and the per-turn runtime line;
played in process against the five real services (scripted model), and line by line from turns."""

from __future__ import annotations

import io
import re

import pytest

from covel.scheduler.v1 import resources_pb2
from covel_cli.play import DEFAULT_WORLD, DEMO_ACTIONS, play, scripted_reader
from covel_cli.play_display import plugin_lines, roll_line, shown_lines, turn_summary
from shared.structs import to_struct

# Its own sessions only: the session's shared group (tests/e2e/conftest.py).
SHARED_SERVICES = True


def result(runtime_id: str, output: dict, status: int = resources_pb2.RUNTIME_STATUS_SUCCESS, ms: int = 120,
           reason: str = "") -> resources_pb2.RuntimeResult:
    return resources_pb2.RuntimeResult(runtime_id=runtime_id, status=status, output=to_struct(output), duration_ms=ms, reason=reason)


def test_roll_lines_show_the_dice_then_the_modifier() -> None:
    assert roll_line({"expression": "2d6+1", "dice": [3, 1], "modifier": 1, "total": 5}) == "2d6+1: [3, 1] + 1 = 5"
    assert roll_line({"expression": "3d8-2", "dice": [8, 1, 4], "modifier": -2, "total": 11}) == "3d8-2: [8, 1, 4] - 2 = 11"
    assert roll_line({"expression": "d20", "dice": [14], "modifier": 0, "total": 14}) == "d20: [14] = 14"


def test_plugin_lines_name_items_and_characters_and_list_the_suggestions() -> None:
    turn = resources_pb2.Turn(logical_turn=4, status=resources_pb2.TURN_STATUS_COMMITTED, runtime_results=[
        result("dice-check/roller", {"checks": [{"action": "I climb.", "skill": "athletics", "roll": 17, "modifier": 0, "dc": 11,
                                                 "total": 17, "outcome": "success"}]}),
        result("narrator", {}, ms=2350),
        result("inventory/apply", {"applied": [{"item": "rusty-key", "name": "rusty key", "delta": 1, "quantity": 1},
                                               {"item": "brass-lantern", "name": "brass lantern", "delta": 0, "quantity": 1},
                                               {"item": "copper-coin", "name": "copper coin", "delta": -1, "quantity": 2}]}),
        result("affinity/apply", {"applied": [{"character": "tobin", "name": "Old Tobin", "delta": 2, "score": 5}]}),
        result("world-time/advance", {"before": {"day": 1, "time": "20:30", "period": "evening"},
                                      "after": {"day": 1, "time": "21:15", "period": "evening"}, "elapsedMinutes": 45, "reason": "travel"}),
        result("guide", {"suggestions": ["I look back at the inn.", "I knock on the lighthouse door.", "I wait."]}),
        result("affinity/judge", {}, status=resources_pb2.RUNTIME_STATUS_FAILED, reason="invalid-output"),
    ])
    lines, suggestions = plugin_lines(turn)
    assert lines == [
        "🎲 athletics: rolled 17+0 vs DC 11 → success",
        "🎒 rusty key +1 (now 1)",
        "🎒 brass lantern in hand",
        "🎒 copper coin -1 (now 2)",
        "♥ Old Tobin +2 (now 5)",
        "🕰 day 1, 21:15 (evening): +45 min, travel",
    ]
    assert suggestions == ["I look back at the inn.", "I knock on the lighthouse door.", "I wait."]

    assert turn_summary(turn, 2.5) == (
        "[turn 4 committed in 2.50s: ✓ dice-check/roller 0.1s, ✓ narrator 2.4s, ✓ inventory/apply 0.1s, ✓ affinity/apply 0.1s, "
        "✓ world-time/advance 0.1s, ✓ guide 0.1s, ✗ affinity/judge 0.1s (invalid-output)]")


@pytest.mark.asyncio(loop_scope="session")
async def test_the_demo_actions_over_grpc_show_every_plugin_line(services) -> None:
    out = io.StringIO()
    code = await play(services.addrs["scheduler"], scripted_reader(DEMO_ACTIONS), out, echo_input=True, world_id=DEFAULT_WORLD)
    assert code == 0
    text = out.getvalue()
    assert "(error" not in text, text
    turns = text.split("\n> ")[1:]
    assert [turn.splitlines()[0] for turn in turns] == list(DEMO_ACTIONS)
    answer, door, promise, tobin, key, trust, dusk, roll, panels = turns
    assert "▤ Character (char-creator, right)\n    Wren\n" in panels and "    courage: 4\n" in panels, panels
    assert "▤ Inventory (inventory, right)" in panels and "    rusty key ×1\n" in panels, panels
    assert "▤ Story time (world-time, right)\n    Day 1, 22:15 (night)\n" in panels, panels
    # The setup: covel play started it (the character form), the demo answered it, and the narrator opened the story.
    setup = text.split("\n> ")[0]
    assert "(setting up the story…)" in setup and "? Your character: name, courage, role" in setup, setup
    assert "This is where the story of Wren begins." in answer and "✓ Your character: Wren" in answer, answer
    assert "✓ char-creator/player-init" in answer and "✓ pregame" in answer and "✓ narrator" in answer

    # Every played turn ends with its runtime line, and the guide's numbered suggestions before it.
    for number, shown in enumerate((door, promise, tobin, key, trust, dusk), start=1):
        assert re.search(rf"\n\[turn {number} committed in \d+\.\d\ds: ✓ ", shown), shown
        assert "✓ narrator " in shown and "\n  What next?\n   1. " in shown
    assert "🕰 day 1, 19:50 (dusk): +20 min, the turn's events" in answer, "the opening is a story turn of the clock too"
    assert "🕰 day 1, 20:10 (evening): +20 min, the turn's events" in door
    # The story world: a quest taken on, what the codex learnt, a hidden event the story stages once its
    # conditions hold (turn 2 on, the lamp dark, the player asking about it), a relationship that changed.
    assert "📜 new quest: Find the missing boats" in promise and "📖 new in the codex: " in promise, promise
    assert "Old Tobin lowers his voice. On the night the lamp went out he saw a small light" in tobin, tobin
    assert "🕸 Mira trusts Sela" in trust, trust
    assert "▤ Quests (core-quest, right)" in panels and "▤ Relationships (npc-graph, right)" in panels, panels
    assert re.search(r"\n  ♥ [\w ]+ \+\d+ \(now \d+\)", tobin), tobin
    assert "🎒 rusty key +1 (now 1)" in key and "🎒 brass lantern in hand" in key, key
    assert "🕰 day 1, 21:10 (evening)" in key
    # "At dusk" said at 21:30 is this evening's: the climb takes 45 minutes, not a day.
    assert re.search(r"🎲 athletics: rolled \d+\+0 vs DC 11 → (critical-)?(success|failure)", dusk), dusk
    assert "🕰 day 1, 22:15 (night): +45 min, travel" in dusk, dusk
    # /roll is RunManual of dice-check/roll: its line, then the manual run's own runtime line.
    rolled = re.search(r"🎲 2d6\+1: \[(\d), (\d)\] \+ 1 = (\d+)", roll)
    assert rolled and int(rolled[1]) + int(rolled[2]) + 1 == int(rolled[3]), roll
    assert re.search(r"\[turn \d+ committed in \d+\.\d\ds: ✓ dice-check/roll \d+\.\ds\]", roll), roll


def test_shown_effects_are_one_line_each() -> None:
    shown = resources_pb2.RuntimeResult(
        notifications=[resources_pb2.Notification(level=resources_pb2.NOTIFICATION_LEVEL_WARNING, title="Storm", text="The tide is rising.")],
        ui=[resources_pb2.UiBlock(id="sheet", title="Sheet", parts=[to_struct({"type": "text", "text": "Mira, scout"}),
                                                                  to_struct({"type": "stat", "label": "HP 7/10"})])],
        interactions=[resources_pb2.Interaction(kind=resources_pb2.INTERACTION_KIND_CHOICE, prompt="Which door?", spec=to_struct({"options": [
                          {"id": "l", "label": "Left"}, {"id": "r", "label": "Right"}]})),
                      resources_pb2.Interaction(kind=resources_pb2.INTERACTION_KIND_FORM, title="Your hero", spec=to_struct({"schema": {"properties": {"name": {}, "age": {}}},
                                                                                         "fieldOrder": ["name", "age"]})),
                      resources_pb2.Interaction(kind=resources_pb2.INTERACTION_KIND_CONFIRM, prompt="Rest here?")])
    assert shown_lines(shown) == ["! Storm: The tide is rising.", "▤ Sheet: Mira, scout; HP 7/10", "? Which door? (Left, Right) · /answer <option>",
                                  "? Your hero: name, age · /answer name=… age=…", "? Rest here? · /answer yes | no"]