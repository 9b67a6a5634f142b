"""A stage whose runtimes start once their own upstream finished (turn/stage_flow.py): no layer waits for a slow
sibling of another plugin; a plugin's later runtimes still wait for its earlier ones; what each sees, and the
turn's record and commit order, are the plan's whatever order the runtimes finish in. The units are a stand-in
the test holds open and lets finish (no clock)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from covel.store.v1 import store_pb2
from services.scheduler.execution.outcome import RuntimeOutcome
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.turn.dependency_graph import Dependency, Node, plan_stage, start_after, upstream_closure
from services.scheduler.turn.stage_flow import StageFlow
from services.scheduler.turn.state import TurnState
from services.scheduler.turn.stream import TurnStream
from tests.scheduler.compiled import compiled_manifest


def needs(*refs: str) -> tuple[Dependency, ...]:
    return tuple(Dependency("runtime", ref) for ref in refs)


class HeldUnits:
    """Runs a unit as far as its start, then waits until the test lets it finish (or fail)."""

    def __init__(self, failing: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.started: list[str] = []
        self.seen: dict[str, list[str]] = {}
        self.gates: dict[str, asyncio.Event] = {}
        self.failing = failing

    def gate(self, runtime_id: str) -> asyncio.Event:
        return self.gates.setdefault(runtime_id, asyncio.Event())

    async def run(self, runtime: Any, scope: Any, run: TurnState, stream: TurnStream, manifest: Any) -> RuntimeOutcome:
        runtime_id = runtime.runtime_id
        self.started.append(runtime_id)
        self.seen[runtime_id] = [p.unit_runtime_id for p in run.runtime_scope(runtime, manifest, scope).turn.proposals]
        await self.gate(runtime_id).wait()
        if runtime_id in self.failing:
            return RuntimeOutcome("failed", "on purpose")
        return RuntimeOutcome(
            "success", writes=[{"type": "plugin.data.set", "payload": {"namespace": "n", "key": runtime_id, "value": 1}}]
        )


def flow(nodes: list[Node], units: HeldUnits, before: list[str] = ()) -> tuple[StageFlow, TurnState, store_pb2.Turn]:  # type: ignore[assignment]
    runtimes = {
        node.runtime_id: SimpleNamespace(
            runtime_id=node.runtime_id,
            plugin_id=node.runtime_id.split("/")[0],
            type="function",
            stage="post-turn",
            visibility="system",
        )
        for node in nodes
    }
    shared = TurnShared(
        history=[], packages={}, manifests={runtime_id: compiled_manifest({}, runtime_id=runtime_id) for runtime_id in runtimes}
    )
    shared.proposals.extend(store_pb2.Proposal(id=unit, unit_runtime_id=unit) for unit in before)
    run, turn = TurnState(shared), store_pb2.Turn(session_id="s")
    scope = SimpleNamespace(session=store_pb2.Session(id="s"), turn_id="t")
    stream = TurnStream(turn, lambda _event: asyncio.sleep(0))
    return StageFlow(plan_stage(nodes), runtimes, units, run, scope, stream), run, turn  # type: ignore[arg-type]


async def until(condition: Any) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("never happened")


@pytest.mark.asyncio
async def test_a_chain_runs_to_its_end_while_a_slow_sibling_of_another_plugin_runs() -> None:
    units = HeldUnits()
    nodes = [
        Node("slow/agent"),
        Node("inv/ledger"),
        Node("inv/apply", dependencies=needs("inv/ledger")),
        Node("ir/world", dependencies=needs("inv/apply")),
    ]
    stage, run, turn = flow(nodes, units)
    running = asyncio.ensure_future(stage.run())
    for runtime_id in ("inv/ledger", "inv/apply", "ir/world"):
        await until(lambda r=runtime_id: r in units.started)
        units.gate(runtime_id).set()
    await until(lambda: "ir/world" in run.statuses)
    assert "slow/agent" not in run.statuses and not running.done(), "the chain ended before the slow sibling"
    assert units.started == ["slow/agent", "inv/ledger", "inv/apply", "ir/world"]
    assert units.seen["ir/world"] == ["inv/ledger", "inv/apply"], "its upstream's writes in commit order"
    units.gate("slow/agent").set()
    await running
    # The record and the commit keep the plan's order, not the order they finished in.
    assert [r.runtime_id for r in turn.runtime_results] == ["slow/agent", "inv/ledger", "inv/apply", "ir/world"]
    assert [p.unit_runtime_id for p in run.shared.proposals] == ["slow/agent", "inv/ledger", "inv/apply", "ir/world"]
    assert run.visible == {}, "a finished runtime's view is dropped"


@pytest.mark.asyncio
async def test_a_plugins_later_runtime_waits_for_its_earlier_ones_and_sees_only_its_upstream() -> None:
    units = HeldUnits(failing={"q/fails"})
    nodes = [
        Node("p/first"),
        Node("q/quick"),
        Node("q/other"),
        Node("q/fails"),
        Node("p/later", dependencies=needs("q/quick")),
        Node("q/gated", dependencies=needs("q/fails")),
    ]
    stage, run, turn = flow(nodes, units, before=["earlier/stage"])
    running = asyncio.ensure_future(stage.run())
    for runtime_id in ("q/quick", "q/other", "q/fails"):
        await until(lambda r=runtime_id: r in units.started)
        units.gate(runtime_id).set()
    await until(lambda: "q/fails" in run.statuses and "q/other" in run.statuses)
    # q/gated's gate fails once q's first runtimes finished: skipped without waiting for p/first.
    await until(lambda: "q/gated" in run.statuses)
    assert run.statuses["q/gated"] == "skipped" and "q/fails did not succeed" in run.outcomes["q/gated"].reason
    assert "p/later" not in units.started, "it reads p/first's writes: it waits for p's runtimes of earlier layers"
    units.gate("p/first").set()
    await until(lambda: "p/later" in units.started)
    units.gate("p/later").set()
    await running
    # What came before the stage, then its upstream (q/quick, and p/first by its plugin): not q/other, another plugin's sibling.
    assert units.seen["p/later"] == ["earlier/stage", "p/first", "q/quick"]
    assert units.seen["q/quick"] == ["earlier/stage"]
    assert run.needs["p/later"] == {"q/quick"}
    assert [r.runtime_id for r in turn.runtime_results] == ["p/first", "q/quick", "q/other", "q/fails", "q/gated", "p/later"]
    assert [p.unit_runtime_id for p in run.shared.proposals] == ["earlier/stage", "p/first", "q/quick", "q/other", "p/later"]


@pytest.mark.asyncio
async def test_a_unit_that_raises_stops_the_others_and_the_stage() -> None:
    class Raising(HeldUnits):
        async def run(self, runtime: Any, *args: Any) -> RuntimeOutcome:
            if runtime.runtime_id == "b/boom":
                raise RuntimeError("boom")
            return await super().run(runtime, *args)

    units = Raising()
    stage, run, _ = flow([Node("a/held"), Node("b/boom")], units)
    with pytest.raises(RuntimeError, match="boom"):
        await stage.run()
    assert units.started == ["a/held"] and "a/held" not in run.statuses


def test_start_after_adds_a_plugins_earlier_layers_and_the_closure_follows_them() -> None:
    plan = plan_stage(
        [
            Node("p/a"),
            Node("q/b"),
            Node("q/c", dependencies=needs("q/b")),
            Node("p/d", dependencies=needs("q/c")),
            Node("q/e", dependencies=needs("q/b")),
        ]
    )
    waits = start_after(plan, {"p/a": "p", "q/b": "q", "q/c": "q", "p/d": "p", "q/e": "q"})
    assert waits == {"p/a": set(), "q/b": set(), "q/c": {"q/b"}, "p/d": {"q/c", "p/a"}, "q/e": {"q/b"}}
    closure = upstream_closure(waits, [r for layer in plan.layers for r in layer])
    assert closure["p/d"] == {"q/c", "q/b", "p/a"} and closure["q/e"] == {"q/b"}
