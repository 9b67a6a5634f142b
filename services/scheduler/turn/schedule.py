"""The turn's schedule: which runtimes this turn runs, in which stage batches, and which event
followers run next. Pure: trigger rules come from selection.py, dependency layers from dependency_graph.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Runtime
from services.scheduler.kinds import Stage
from services.scheduler.turn.dependency_graph import StagePlan
from services.scheduler.turn.selection import STAGES, TriggerHistory, scheduled_this_turn, setup_due
from services.scheduler.turn.settlements import is_maintainer
from shared.manifest import CompiledManifest
from shared.structs import from_struct

# An event chain follows at most this many layers of events emitted by events' followers.
MAX_EVENT_LAYERS = 8


def select_runtimes(runtimes: list[Runtime], manifests: Mapping[str, CompiledManifest], logical_turn: int,
                    history: TriggerHistory | None, session: store_pb2.Session, versions: Mapping[str, str], *,
                    world_has_dimensions: bool = True) -> list[Runtime]:
    """The runtimes this turn schedules by their triggers. Setup runtimes only while not yet done for
    their plugin's `versions`; in a session's setup phase the later stages run only once the setup stage
    finished the setup (runner._run_stages). Dimension maintainers only in a world with dimensions (else
    they would have nothing to settle)."""
    selected = [runtime for runtime in runtimes
                if scheduled_this_turn(manifests[runtime.runtime_id], runtime.stage, logical_turn, history)]
    selected = [r for r in selected if r.stage != Stage.SETUP
                or setup_due(from_struct(session.setup_runtimes[r.runtime_id]) if r.runtime_id in session.setup_runtimes else None,
                             versions.get(r.plugin_id, ""))]
    if not world_has_dimensions:
        selected = [r for r in selected if not is_maintainer(manifests[r.runtime_id])]
    return selected


@dataclass
class StageBatches:
    """The scheduled runtimes that run in the turn, stage by stage in STAGES order (no empty stage),
    and the detached ones, which the commit queues as jobs instead."""

    stages: list[list[Runtime]] = field(default_factory=list)
    detached: list[Runtime] = field(default_factory=list)


def stage_batches(selected: list[Runtime], manifests: Mapping[str, CompiledManifest]) -> StageBatches:
    detached = [runtime for runtime in selected if manifests[runtime.runtime_id].is_detached]
    detached_ids = {runtime.runtime_id for runtime in detached}
    stages = [[r for r in selected if r.stage == stage and r.runtime_id not in detached_ids] for stage in STAGES]
    return StageBatches([batch for batch in stages if batch], detached)


def next_event_layer(followers: Mapping[str, object], manifests: Mapping[str, CompiledManifest], fresh: list[dict],
                     finished: Iterable[str]) -> dict[str, list[dict]]:
    """Followers that run next: those not yet finished this turn that follow a topic among the
    `fresh` events, each with the events that activate it (in `followers` order)."""
    done = set(finished)
    layer: dict[str, list[dict]] = {}
    for runtime_id in followers:
        if runtime_id in done:
            continue
        matched = [event for event in fresh if event["topic"] in manifests[runtime_id].schedule.trigger.topics]
        if matched:
            layer[runtime_id] = matched
    return layer


def needed_upstream(plan: StagePlan, runtime_id: str, statuses: Mapping[str, str]) -> set[str]:
    """The upstream runtimes whose success a runtime's gating dependencies needed: a unit discarded
    at commit takes down what needed it (store: read dependencies)."""
    return {upstream_id for dependency, upstream in plan.upstream.get(runtime_id, []) if dependency.gate
            for upstream_id in upstream if statuses.get(upstream_id) == "success"}
