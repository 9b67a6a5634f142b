"""Layers, cycles and success gates of a stage's dependency graph."""

import random

from services.scheduler.turn.dependency_graph import Dependency, Node, dependencies_of, gate_reason, plan_stage
from tests.scheduler.compiled import compiled_package


def needs(ref: str, **kwargs) -> Dependency:
    return Dependency("contract" if "@" in ref else "runtime", ref, **kwargs)


def after(ref: str) -> Dependency:
    return Dependency("contract" if "@" in ref else "runtime", ref, gate=False)


def test_four_layers_with_one_parallel_layer() -> None:
    nodes = [
        Node("p/d", dependencies=(needs("p/b"), needs("p/c"))),
        Node("p/b", dependencies=(needs("p/a"),)),
        Node("p/c", dependencies=(after("p/a"),)),
        Node("p/a"),
        Node("p/e", dependencies=(needs("p/d"),)),
    ]
    plan = plan_stage(nodes)
    assert plan.layers == [["p/a"], ["p/b", "p/c"], ["p/d"], ["p/e"]]
    assert plan.skipped == {}


def test_a_cycle_is_skipped_with_its_path_while_another_branch_runs() -> None:
    nodes = [
        Node("p/x", dependencies=(needs("p/y"),)),
        Node("p/y", dependencies=(needs("p/x"),)),
        Node("p/after-cycle", dependencies=(needs("p/x"),)),
        Node("p/free"),
    ]
    plan = plan_stage(nodes)
    assert plan.layers == [["p/free"]]
    assert plan.skipped["p/x"] == "dependency-cycle: p/x → p/y → p/x"
    assert plan.skipped["p/y"] == plan.skipped["p/x"]
    assert plan.skipped["p/after-cycle"] == plan.skipped["p/x"]


def test_contract_edges_and_an_earlier_provider_satisfying_needs() -> None:
    nodes = [
        Node("a/reader", dependencies=(needs("facts@1"),)),
        Node("b/writer", provides=("facts@1",), dependencies=(after("a/reader"),)),
    ]
    assert plan_stage(nodes).skipped["a/reader"].startswith("dependency-cycle")
    plan = plan_stage(nodes, satisfied_contracts=frozenset({"facts@1"}))
    assert plan.skipped == {} and plan.layers == [["a/reader"], ["b/writer"]]


def test_success_gates() -> None:
    nodes = [Node("p/a"), Node("p/b", dependencies=(needs("p/a"),)), Node("p/c", dependencies=(after("p/a"),))]
    plan = plan_stage(nodes)
    assert gate_reason(plan, "p/b", {"p/a": "failed"}, frozenset()) == "needs: p/a did not succeed (failed)"
    assert gate_reason(plan, "p/c", {"p/a": "failed"}, frozenset()) is None
    assert gate_reason(plan, "p/b", {"p/a": "success"}, frozenset()) is None


def test_required_input_without_a_provider_gates_and_all_needs_every_provider() -> None:
    nodes = [
        Node("p/reader", dependencies=(Dependency("contract", "missing@1", binding="facts"),)),
        Node("p/all", dependencies=(Dependency("contract", "x@1", cardinality="all"),)),
        Node("q/one", provides=("x@1",)),
        Node("r/two", provides=("x@1",)),
    ]
    plan = plan_stage(nodes)
    assert gate_reason(plan, "p/reader", {}, frozenset()) == "input facts: no provider of missing@1 in this session"
    assert gate_reason(plan, "p/all", {"q/one": "success", "r/two": "failed"}, frozenset()).startswith("needs: not every provider")
    assert gate_reason(plan, "p/all", {"q/one": "success", "r/two": "success"}, frozenset()) is None


def test_dependencies_from_a_compiled_manifest() -> None:
    package = compiled_package("p", {
        "p/main": {
            "schedule": {"stage": "post-turn", "needs": [{"runtime": "p/a", "cardinality": "one"}],
                         "after": [{"contract": "x@1", "cardinality": "one"}]},
            "io": {"inputs": {
                "story": {"from": {"contract": "narrative-engine@2", "cardinality": "one"}, "required": False, "scope": "turn"},
                "old": {"from": {"runtime": "p/b"}, "scope": "committed", "recordAs": "r"},
                "digest": {"from": {"kernel": "turn-digest@1"}},
            }},
        },
        "p/a": {},
        "p/b": {"io": {"output": {"recordAs": "r"}}},
    })
    manifest = next(runtime.manifest for runtime in package.runtimes if runtime.runtime_id == "p/main")
    assert dependencies_of(manifest) == (
        Dependency("runtime", "p/a"),
        Dependency("contract", "x@1", gate=False),
        Dependency("contract", "narrative-engine@2", gate=False, binding="story"),
    )


def _layers_by_rescanning(nodes: list[Node]) -> list[list[str]]:
    """The layering as first written: per layer, every runtime left whose upstream all ran (N² for a chain)."""
    ids = [node.runtime_id for node in nodes]
    waits_on = {node.runtime_id: {d.ref for d in node.dependencies if d.ref in ids} for node in nodes}
    remaining, done, layers = ids, set(), []
    while remaining:
        layer = [runtime_id for runtime_id in remaining if waits_on[runtime_id] <= done]
        layers.append(layer)
        done.update(layer)
        remaining = [runtime_id for runtime_id in remaining if runtime_id not in done]
    return layers


def test_a_chain_of_200_runtimes_is_200_layers_of_one() -> None:
    """Built in one pass over the edges (the benchmark's scale; a chain was the worst case of rescanning)."""
    nodes = [Node(f"p/r{i:03}", dependencies=(needs(f"p/r{i - 1:03}"),) if i else ()) for i in range(200)]
    assert plan_stage(list(reversed(nodes))).layers == [[f"p/r{i:03}"] for i in range(200)]


def test_layers_of_200_runtimes_are_those_of_rescanning_in_catalogue_order() -> None:
    rng = random.Random(7)
    for _ in range(20):
        ids = [f"p/r{i:03}" for i in range(200)]
        rng.shuffle(ids)
        rank = {runtime_id: index for index, runtime_id in enumerate(sorted(ids))}
        # Edges only towards smaller ids: acyclic, in a catalogue order that is not the id order.
        nodes = [Node(runtime_id, dependencies=tuple(
            rng.choice((needs, after))(upstream) for upstream in rng.sample(sorted(ids)[:rank[runtime_id]], min(rank[runtime_id], rng.randint(0, 3)))))
            for runtime_id in ids]
        plan = plan_stage(nodes)
        assert plan.layers == _layers_by_rescanning(nodes) and plan.skipped == {}
