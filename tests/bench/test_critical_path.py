"""bench/critical_path.py on a turn whose critical path is known: stages one after another, a stage's runtimes
waiting only for their upstream, and an agent before the story whose output the story does not read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench.critical_path import turn_paths
from shared.manifest.runtime import InputBinding


def manifest(reads: str = "", after: str = "") -> SimpleNamespace:
    """What the scheduler's dependency rules read of a compiled manifest: needs/after, turn inputs, the output contract."""
    bindings = {}
    if reads:
        bindings["upstream"] = InputBinding.model_validate(
            {"from": {"runtime": reads, "cardinality": "one"}, "scope": "turn", "required": True})
    order = [SimpleNamespace(runtime=after, contract=None, cardinality="one")] if after else []
    return SimpleNamespace(schedule=SimpleNamespace(needs=[], after=order),
                           io=SimpleNamespace(bindings=lambda: bindings, output=SimpleNamespace(contract="")))


def test_the_path_follows_stages_and_edges_and_names_what_the_story_does_not_read() -> None:
    ran = {"guide": "pre-turn", "mood": "pre-turn", "lore": "narrative", "side": "narrative", "story": "narrative",
           "tracker": "post-turn"}
    manifests = {"guide": manifest(), "mood": manifest(), "lore": manifest(), "side": manifest(),
                 "story": manifest(reads="lore"), "tracker": manifest(after="story")}
    weight = {"guide": 1.0, "mood": 0.4, "lore": 0.5, "side": 2.9, "story": 2.0, "tracker": 0.3}
    paths = turn_paths(ran, manifests, weight, "story", 0.7, agents=set(ran))  # type: ignore[arg-type]
    # pre-turn: guide (1.0, mood runs beside it); narrative: side alone (2.9) beats lore -> story (2.5); post-turn 0.3.
    assert paths.turn.seconds == pytest.approx(1.0 + 2.9 + 0.3)
    # The first story text waits for guide, then lore, then the story's 0.7 s to its first text; side runs beside.
    assert paths.first_text.seconds == pytest.approx(1.0 + 0.5 + 0.7)
    assert [runtime for runtime, _ in paths.first_text.chain] == ["guide", "lore", "story"]
    assert paths.unread_on_story_path == [("guide", 1.0)]
