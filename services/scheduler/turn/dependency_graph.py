"""A stage's runtimes as layers of a dependency graph (spec: 阶段和调度顺序).

Edges: `needs` (order and success gate), `after` (order only), `io.inputs` (a required input
is a `needs`, an optional one an `after`). A reference is a runtime id or a contract; a
contract points at its providers in the same batch. A provider of a single-provider
contract that already succeeded earlier (an earlier stage or layer) satisfies `needs` without
an edge, so another candidate provider in this batch cannot make a false cycle.
Runtimes on a cycle, and everything that waits on them, are `skipped: dependency-cycle`
with the cycle's path; the other branches still run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from shared.manifest import CompiledManifest
from shared.manifest.runtime import DependencyTarget, InputSource


@dataclass(frozen=True)
class Dependency:
    # "runtime" or "contract"
    kind: str
    ref: str
    cardinality: str = "one"
    # needs (success gate) or only order
    gate: bool = True
    # The input binding it came from, for reasons ("" for needs/after).
    binding: str = ""


@dataclass(frozen=True)
class Node:
    runtime_id: str
    provides: tuple[str, ...] = ()
    dependencies: tuple[Dependency, ...] = ()


@dataclass
class StagePlan:
    layers: list[list[str]] = field(default_factory=list)
    # runtime id -> reason ("dependency-cycle: a → b → a")
    skipped: dict[str, str] = field(default_factory=dict)
    # runtime id -> its upstream runtime ids in this batch, with whether each is a success gate
    upstream: dict[str, list[tuple[Dependency, list[str]]]] = field(default_factory=dict)


def _reference(target: DependencyTarget | InputSource) -> tuple[str, str, str] | None:
    """(kind, ref, cardinality) of a needs/after entry or an input's `from`."""
    if target.runtime:
        return "runtime", target.runtime, target.cardinality
    if target.contract:
        return "contract", target.contract, target.cardinality
    return None


def dependencies_of(manifest: CompiledManifest) -> tuple[Dependency, ...]:
    """The edges a compiled runtime manifest declares (kernel inputs add none)."""
    schedule = manifest.schedule
    found: list[Dependency] = []
    for gate, entries in ((True, schedule.needs), (False, schedule.after)):
        for entry in entries:
            ref = _reference(entry)
            if ref:
                found.append(Dependency(*ref, gate=gate))
    for binding, spec in manifest.io.bindings().items():
        if spec.scope != "turn":
            continue
        ref = _reference(spec.from_)
        if ref:
            found.append(Dependency(*ref, gate=spec.required, binding=binding))
    return tuple(found)


def _providers(nodes: Iterable[Node]) -> dict[str, list[str]]:
    providers: dict[str, list[str]] = {}
    for node in nodes:
        for contract in node.provides:
            providers.setdefault(contract, []).append(node.runtime_id)
    return providers


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with a cycle (Tarjan), each as a path in id order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for target in edges:
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(_cycle_path(sorted(component), graph))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _cycle_path(members: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A readable path around the component, starting at its smallest id: a → b → a."""
    member_set = set(members)
    path = [members[0]]
    seen = {members[0]}
    current = members[0]
    while True:
        # graph edges point from a runtime to what it waits on; walk them.
        candidates = sorted(target for target in graph[current] if target in member_set)
        nxt = next((c for c in candidates if c not in seen), candidates[0])
        path.append(nxt)
        if nxt in seen:
            return path
        seen.add(nxt)
        current = nxt


def plan_stage(nodes: list[Node], satisfied_contracts: frozenset[str] = frozenset()) -> StagePlan:
    """Layers of runtimes that can run together, in the given (catalogue) order within a layer."""
    plan = StagePlan()
    ids = [node.runtime_id for node in nodes]
    providers = _providers(nodes)
    waits_on: dict[str, set[str]] = {runtime_id: set() for runtime_id in ids}
    for node in nodes:
        edges: list[tuple[Dependency, list[str]]] = []
        for dependency in node.dependencies:
            if dependency.kind == "runtime":
                upstream = [dependency.ref] if dependency.ref in waits_on else []
            else:
                if dependency.gate and dependency.cardinality == "one" and dependency.ref in satisfied_contracts:
                    upstream = []
                else:
                    upstream = [p for p in providers.get(dependency.ref, []) if p != node.runtime_id]
            edges.append((dependency, upstream))
            waits_on[node.runtime_id].update(upstream)
        plan.upstream[node.runtime_id] = edges

    cyclic: dict[str, str] = {}
    for path in _cycles(waits_on):
        reason = "dependency-cycle: " + " → ".join(path)
        for member in path:
            cyclic.setdefault(member, reason)
    # Whatever waits on a cycle member, directly or not, is skipped with that cycle.
    changed = True
    while changed:
        changed = False
        for runtime_id in ids:
            if runtime_id in cyclic:
                continue
            blocked = next((cyclic[u] for u in sorted(waits_on[runtime_id]) if u in cyclic), None)
            if blocked:
                cyclic[runtime_id] = blocked
                changed = True
    plan.skipped = {runtime_id: cyclic[runtime_id] for runtime_id in ids if runtime_id in cyclic}

    plan.layers = _layers([runtime_id for runtime_id in ids if runtime_id not in cyclic], waits_on)
    return plan


def _layers(ids: list[str], waits_on: Mapping[str, set[str]]) -> list[list[str]]:
    """Each runtime in the layer after the last of its upstream (none: the first), in `ids` order within
    a layer. One pass over the edges (Kahn): rescanning what remains per layer was N² for a chain of N.
    `ids` holds no cycle, and nothing that waits on one."""
    order = {runtime_id: index for index, runtime_id in enumerate(ids)}
    waiting = {runtime_id: len(waits_on[runtime_id]) for runtime_id in ids}
    dependents: dict[str, list[str]] = {runtime_id: [] for runtime_id in ids}
    for runtime_id in ids:
        for upstream in waits_on[runtime_id]:
            dependents[upstream].append(runtime_id)
    layers = []
    layer = [runtime_id for runtime_id in ids if not waiting[runtime_id]]
    while layer:
        layers.append(layer)
        ready = []
        for runtime_id in layer:
            for dependent in dependents[runtime_id]:
                waiting[dependent] -= 1
                if not waiting[dependent]:
                    ready.append(dependent)
        layer = sorted(ready, key=order.__getitem__)
    return layers


def gate_reason(
    plan: StagePlan, runtime_id: str, statuses: Mapping[str, str], satisfied_contracts: frozenset[str]
) -> str | None:
    """Why `runtime_id` must not run now that its upstream finished; None when it may."""
    for dependency, upstream in plan.upstream.get(runtime_id, []):
        if not dependency.gate:
            continue
        label = f"input {dependency.binding}" if dependency.binding else "needs"
        if dependency.kind == "runtime":
            if statuses.get(dependency.ref) != "success":
                state = statuses.get(dependency.ref, "not run")
                return f"{label}: {dependency.ref} did not succeed ({state})"
            continue
        if not upstream:
            if dependency.ref in satisfied_contracts:
                continue
            return f"{label}: no provider of {dependency.ref} in this session"
        succeeded = [u for u in upstream if statuses.get(u) == "success"]
        if dependency.cardinality == "all" and len(succeeded) < len(upstream):
            failed = ", ".join(u for u in upstream if u not in succeeded)
            return f"{label}: not every provider of {dependency.ref} succeeded ({failed})"
        if not succeeded:
            return f"{label}: no provider of {dependency.ref} succeeded"
    return None


def parallel_safe(manifest: CompiledManifest) -> bool:
    """effects.parallelSafe: false runs the runtime alone in its layer (not beside any other); unset or true, beside."""
    return (manifest.effects or {}).get("parallelSafe") is not False


def start_after(plan: StagePlan, plugin_of: Mapping[str, str]) -> dict[str, set[str]]:
    """runtime id -> what it starts after when each runtime starts as soon as its own upstream finished (not a
    layer at a time): its dependencies in the batch, and its plugin's runtimes of earlier layers, whose plugin-data
    writes it reads (spec: 执行内的插件数据可见性) as it would have a layer later. Edges only point to earlier
    layers, so they make no cycle."""
    layer_of = {runtime_id: index for index, layer in enumerate(plan.layers) for runtime_id in layer}
    by_plugin: dict[str, list[str]] = {}
    for runtime_id in layer_of:
        by_plugin.setdefault(plugin_of[runtime_id], []).append(runtime_id)
    waits: dict[str, set[str]] = {}
    for runtime_id, layer in layer_of.items():
        found = {u for _, upstream in plan.upstream.get(runtime_id, []) for u in upstream if u in layer_of}
        found.update(other for other in by_plugin[plugin_of[runtime_id]] if layer_of[other] < layer)
        waits[runtime_id] = found
    return waits


def upstream_closure(waits: Mapping[str, set[str]], order: list[str]) -> dict[str, frozenset[str]]:
    """runtime id -> everything it starts after, directly or not (`order` lists each after all it waits on)."""
    closure: dict[str, frozenset[str]] = {}
    for runtime_id in order:
        found = set(waits[runtime_id])
        for upstream in waits[runtime_id]:
            found |= closure[upstream]
        closure[runtime_id] = frozenset(found)
    return closure
