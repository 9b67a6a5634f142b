"""A turn's critical path: the longest chain of model time the stage and dependency rules force.

Stages run one after another (setup, pre-turn, narrative, post-turn, audit); inside a stage a runtime waits only
for its upstream (`needs`, `after`, turn-scoped `io.inputs`, as the scheduler plans them:
services/scheduler/turn/dependency_graph.py). A runtime's weight is the model time its calls take at the model's
pace (first token after the time to first token, then one token each 1/tokens-per-second), so the path is what
a turn cannot beat on that model; anything the turn takes beyond it is waiting that the rules do not force.
The path to the first story text ends where the story runtime's reply reaches its first segment text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from services.scheduler.turn.dependency_graph import Node, dependencies_of, plan_stage
from services.scheduler.turn.recording import output_contracts
from shared.manifest import CompiledManifest

STAGE_ORDER = ("setup", "pre-turn", "narrative", "post-turn", "audit")


@dataclass
class Path:
    seconds: float = 0.0
    # The chain's runtimes in order, with each one's model seconds.
    chain: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class TurnPaths:
    turn: Path
    first_text: Path
    # Agents on the path to the first story text whose output the story does not read (runtime id, seconds).
    unread_on_story_path: list[tuple[str, float]] = field(default_factory=list)


def _longest(stage: list[str], manifests: Mapping[str, CompiledManifest], weight: Mapping[str, float],
             end: str = "") -> Path:
    """The longest weighted chain through one stage's dependency edges (ending at `end` when given)."""
    nodes = [Node(r, provides=output_contracts(manifests[r]), dependencies=dependencies_of(manifests[r])) for r in stage]
    plan = plan_stage(nodes)
    upstream = {r: {u for _, ids in plan.upstream.get(r, []) for u in ids} for r in stage}
    best: dict[str, Path] = {}
    for layer in plan.layers:
        for runtime in layer:
            before = max((best[u] for u in upstream[runtime] if u in best), key=lambda p: p.seconds, default=Path())
            own = weight.get(runtime, 0.0)
            best[runtime] = Path(before.seconds + own, [*before.chain, (runtime, own)])
    if end:
        return best.get(end, Path())
    return max(best.values(), key=lambda p: p.seconds, default=Path())


def _read_by(story: str, ran: Mapping[str, str], manifests: Mapping[str, CompiledManifest]) -> set[str]:
    """The runtimes whose outputs reach the story through turn-scoped inputs, directly or through others."""
    providers: dict[str, list[str]] = {}
    for runtime in ran:
        for contract in output_contracts(manifests[runtime]):
            providers.setdefault(contract, []).append(runtime)
    read, todo = set(), [story]
    while todo:
        for binding in manifests[todo.pop()].io.bindings().values():
            if binding.scope != "turn":
                continue
            source = binding.from_
            for upstream in ([source.runtime] if source.runtime else providers.get(source.contract or "", [])):
                if upstream in ran and upstream not in read:
                    read.add(upstream)
                    todo.append(upstream)
    return read


def turn_paths(ran: Mapping[str, str], manifests: Mapping[str, CompiledManifest], weight: Mapping[str, float],
               story: str, story_first_text_s: float, agents: set[str]) -> TurnPaths:
    """`ran`: runtime id -> stage of each runtime the turn ran; `weight`: its model seconds; `story`: the story
    runtime and `story_first_text_s` its model seconds up to its first story text."""
    stages = [[r for r in ran if ran[r] == stage] for stage in STAGE_ORDER]
    turn, first = Path(), Path()
    story_stage = ran.get(story, "")
    reached = False
    for name, members in zip(STAGE_ORDER, stages, strict=True):
        if not members:
            continue
        longest = _longest(members, manifests, weight)
        turn = Path(turn.seconds + longest.seconds, [*turn.chain, *longest.chain])
        if reached:
            continue
        if name == story_stage:
            to_story = _longest(members, manifests, {**weight, story: story_first_text_s}, end=story)
            first = Path(first.seconds + to_story.seconds, [*first.chain, *to_story.chain])
            reached = True
        else:
            first = Path(first.seconds + longest.seconds, [*first.chain, *longest.chain])
    read = _read_by(story, ran, manifests) if story in ran else set()
    unread = [(r, s) for r, s in first.chain if r != story and r in agents and s > 0 and r not in read]
    return TurnPaths(turn, first, unread)
