"""Each activation rule of the lorebook with a fixed seed: keys, regex on RE2, the secondary-key and NOT filters,
recursion and its limits, sticky / cooldown / delay / every / once across turns, probability, inclusion groups,
the budget's overflow order. The same seed gives the same activations."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.scheduler.agent.lorebook_activation import Activation, Entry, activate


def entry(entry_id: str, keys: list[str] | None = None, content: str = "", constant: bool = False, **rules: Any) -> Entry:
    return Entry("world", entry_id, content or f"About {entry_id}.", keys=tuple(keys or []), constant=constant, rules=rules)


def run(entries: list[Entry], window: list[str], turn: int = 1, timers: dict[str, Any] | None = None, seed: int = 7,
        **settings: Any) -> Activation:
    return activate(entries, settings, window, turn, timers or {}, random.Random(seed).random)


def ids(result: Activation) -> list[str]:
    return [entry.id for entry in result.entries]


def test_keys_constant_and_disabled() -> None:
    lore = [entry("lamp", ["lighthouse"]), entry("salt", constant=True), entry("boat", ["boat"]),
            Entry("world", "off", "x", keys=("lighthouse",), disabled=True)]
    result = run(lore, ["The LIGHTHOUSE is dark."])
    assert ids(result) == ["lamp", "salt"]
    assert result.why == {"world/lamp": "key:lighthouse", "world/salt": "constant"}


def test_case_whole_words_and_regex() -> None:
    lore = [entry("case", ["Lamp"], caseSensitive=True), entry("part", ["lamp"], wholeWords=False), entry("word", ["lamp"]),
            entry("slash", ["/sto+rm/i"]), entry("plain-regex", [r"gull\s+point"], useRegex=True)]
    assert ids(run(lore, ["the lamplight over Gull   Point in a STOOORM"])) == ["part", "plain-regex", "slash"]
    assert ids(run(lore, ["A Lamp."])) == ["case", "part", "word"]


def test_secondary_logic_and_the_not_filters() -> None:
    def logic(name: str) -> Entry:
        return entry(name, ["harbor"], secondaryKeys=["night", "fog"], selectiveLogic=name)

    lore = [logic("andAny"), logic("andAll"), logic("notAny"), logic("notAll"), entry("excl", ["harbor"], excludeKeys=["calm"])]
    assert ids(run(lore, ["harbor at night"])) == ["andAny", "excl", "notAll"]
    assert ids(run(lore, ["harbor at night in fog"])) == ["andAll", "andAny", "excl"]
    assert ids(run(lore, ["harbor, calm"])) == ["notAll", "notAny"]


def test_scan_depth_reads_only_the_last_messages() -> None:
    lore = [entry("old", ["kraken"]), entry("deep", ["kraken"], scanDepth=4)]
    window = ["a kraken rose", "then nothing", "and more nothing", "the player waits"]
    assert ids(run(lore, window)) == ["deep"]
    assert ids(run(lore, window, scanDepth=3)) == ["deep"]


def test_recursion_its_flags_and_its_limit() -> None:
    chain = [entry("a", ["alpha"], "mentions bravo"), entry("b", ["bravo"], "mentions charlie"),
             entry("c", ["charlie"], "mentions delta"), entry("d", ["delta"], "end")]
    result = run(chain, ["alpha"])
    assert ids(result) == ["a", "b", "c", "d"] and result.why["world/d"] == "recursion:3:delta"
    assert ids(run(chain, ["alpha"], maxRecursion=1)) == ["a", "b"]
    assert ids(run(chain, ["alpha"], recursive=False)) == ["a"]
    flagged = [entry("a", ["alpha"], "mentions bravo", preventRecursion=True), entry("b", ["bravo"])]
    assert ids(run(flagged, ["alpha"])) == ["a"]
    excluded = [entry("a", ["alpha"], "mentions bravo"), entry("b", ["bravo"], excludeRecursion=True)]
    assert ids(run(excluded, ["alpha"])) == ["a"] and ids(run(excluded, ["bravo"])) == ["b"]
    delayed = [entry("a", ["alpha"], "mentions bravo"), entry("b", ["bravo"], delayUntilRecursion=True)]
    assert ids(run(delayed, ["bravo"])) == [] and ids(run(delayed, ["alpha"])) == ["a", "b"]


def play(lore: list[Entry], windows: list[list[str]]) -> list[list[str]]:
    timers: dict[str, Any] = {}
    seen = []
    for turn, window in enumerate(windows, 1):
        result = activate(lore, {}, window, turn, timers, random.Random(turn).random)
        timers = result.timers
        seen.append(ids(result))
    return seen


def test_sticky_and_cooldown_across_turns() -> None:
    lore = [entry("storm", ["storm"], sticky=2, cooldown=2)]
    turns = [["a storm"], ["calm"], ["calm"], ["calm"], ["storm again"], ["storm again"], ["storm again"]]
    # up at 1 by its key, held at 2 and 3 (sticky), free at 4, cooling at 4 and 5, up again at 6
    assert play(lore, turns) == [["storm"], ["storm"], ["storm"], [], [], ["storm"], ["storm"]]


def test_delay_every_and_once() -> None:
    lore = [entry("late", ["x"], delay=2), entry("even", ["x"], every=2), entry("single", ["x"], once=True)]
    assert play(lore, [["x"]] * 4) == [["single"], ["even"], ["late"], ["even", "late"]]


def test_probability_is_drawn_from_the_seed() -> None:
    lore = [entry(f"p{n}", ["x"], probability=50) for n in range(20)]
    first = [ids(run(lore, ["x"], seed=seed)) for seed in range(5)]
    assert first == [ids(run(lore, ["x"], seed=seed)) for seed in range(5)]  # the same seed, the same entries
    assert all(0 < len(chosen) < 20 for chosen in first) and len({tuple(chosen) for chosen in first}) > 1
    assert ids(run([entry("never", ["x"], probability=0)], ["x"])) == []
    assert run([entry("never", ["x"], probability=0)], ["x"]).skipped == {"world/never": "probability"}


def test_inclusion_groups() -> None:
    lore = [entry("a", ["x"], group="weather", groupWeight=1), entry("b", ["x"], group="weather", groupWeight=1000),
            entry("c", ["x"], group="other")]
    winners = {tuple(ids(run(lore, ["x"], seed=seed))) for seed in range(30)}
    assert ("b", "c") in winners and all(len(chosen) == 2 for chosen in winners)
    override = [entry("a", ["x"], group="g", groupOverride=True, order=5), entry("b", ["x"], group="g", groupOverride=True, order=9),
                entry("c", ["x"], group="g")]
    result = run(override, ["x"])
    assert ids(result) == ["b"] and result.skipped == {"world/a": "group", "world/c": "group"}


def test_budget_overflow_keeps_constant_then_the_highest_order() -> None:
    lore = [entry("rule", constant=True, content="c" * 40, order=1), entry("low", ["x"], content="l" * 40, order=10),
            entry("high", ["x"], content="h" * 40, order=90), entry("mid", ["x"], content="m" * 40, order=50)]
    result = run(lore, ["x"], tokenBudget=30)  # 10 tokens each: room for three
    assert ids(result) == ["rule", "mid", "high"]  # prompt order: order ascending
    assert result.skipped == {"world/low": "budget"} and result.budget_used == 30
    trace = result.trace(1)
    assert trace["budgetUsed"] == 30 and trace["skipped"] == [{"entry": "world/low", "why": "budget"}]
    assert [item["why"] for item in trace["entries"]] == ["constant", "key:x", "key:x"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_same_seed_gives_the_same_turns(seed: int) -> None:
    lore = [entry(f"e{n}", ["x", f"k{n}"], content=f"k{n + 1}", probability=60, group="g" if n % 3 == 0 else "", sticky=n % 2,
                  cooldown=n % 3) for n in range(30)]
    def many() -> list[list[str]]:
        timers: dict[str, Any] = {}
        out = []
        for turn in range(1, 6):
            result = activate(lore, {"tokenBudget": 40}, ["x k3"], turn, timers, random.Random(seed * 100 + turn).random)
            timers = result.timers
            out.append(ids(result))
        return out
    assert many() == many()


RULES = st.fixed_dictionaries({}, optional={
    "sticky": st.integers(0, 3), "cooldown": st.integers(0, 3), "delay": st.integers(0, 3), "every": st.integers(0, 3),
    "once": st.booleans(), "probability": st.integers(0, 100), "order": st.integers(-5, 5), "group": st.sampled_from(["", "g", "h"]),
    "groupOverride": st.booleans(), "groupWeight": st.integers(1, 5), "excludeRecursion": st.booleans(),
    "preventRecursion": st.booleans(), "delayUntilRecursion": st.booleans(), "scanDepth": st.integers(0, 3),
    "secondaryKeys": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2),
    "selectiveLogic": st.sampled_from(["andAny", "andAll", "notAny", "notAll"])})
ENTRIES = st.lists(st.tuples(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=2), st.sampled_from(["a", "b", "c", "d", "x y"]),
                             st.booleans(), st.booleans(), RULES), max_size=12)


@settings(max_examples=200, deadline=None)
@given(written=ENTRIES, windows=st.lists(st.lists(st.sampled_from(["a", "b", "c", "d", "zz"]), max_size=3), min_size=1, max_size=5),
       budget=st.integers(1, 40), seed=st.integers(0, 1000))
def test_any_lorebook_is_deterministic_and_bounded(written, windows, budget, seed) -> None:
    lore = [Entry("world", f"e{n}", content * 3, keys=tuple(keys), constant=constant, disabled=disabled, rules=rules)
            for n, (keys, content, constant, disabled, rules) in enumerate(written)]

    def many() -> list[Activation]:
        timers: dict[str, Any] = {}
        out = []
        for turn, window in enumerate(windows, 1):
            result = activate(lore, {"tokenBudget": budget}, [" ".join(window)], turn, timers, random.Random(seed * 10 + turn).random)
            timers = result.timers
            out.append(result)
        return out

    first, second = many(), many()
    assert [ids(r) for r in first] == [ids(r) for r in second] and [r.why for r in first] == [r.why for r in second]
    for result in first:
        assert result.budget_used <= budget and result.budget_used == sum(e.tokens for e in result.entries)
        assert not any(e.disabled for e in result.entries) and set(result.why) == {e.key for e in result.entries}
        groups = [e.rule("group") for e in result.entries if e.rule("group")]
        assert len(groups) == len(set(groups)), "one entry per inclusion group"
        assert not set(result.why) & set(result.skipped)


def test_the_trace_keeps_a_bounded_record_of_what_was_left_out() -> None:
    from services.scheduler.agent.lorebook_activation import TRACE_SKIPPED

    lore = [entry(f"e{n:03}", ["x"], delay=5) for n in range(TRACE_SKIPPED + 20)]
    trace = run(lore, ["x"]).trace(1)
    assert len(trace["skipped"]) == TRACE_SKIPPED and trace["skippedMore"] == 20 and trace["skipped"][0] == {"entry": "world/e000", "why": "delay"}
