"""Validation-only advice on a package's own dependency graph: runtimes of one package that wait
on each other (schedule.needs / schedule.after) in a cycle. The package still loads; at run time
the scheduler skips the cycle's runtimes (`dependency-cycle`), so the author is told here first."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

from services.registry.diagnostics import DiagnosticBag
from services.registry.runtime_compiler import CompiledRuntime

CYCLE_CODE = "dependency-cycle"
WAIT_FIELDS = ("needs", "after")


def _waits_on(runtime: CompiledRuntime, own: set[str]) -> set[str]:
    schedule = runtime.manifest.get("schedule") or {}
    return {
        entry["runtime"]
        for field in WAIT_FIELDS
        for entry in schedule.get(field) or []
        if isinstance(entry, dict) and entry.get("runtime") in own
    }


def warn_dependency_cycles(runtimes: list[CompiledRuntime], bag: DiagnosticBag) -> None:
    """One warning per cycle among `runtimes` (one package's), naming its path."""
    own = {runtime.runtime_id: runtime for runtime in runtimes}
    graph = {runtime_id: _waits_on(runtime, set(own)) for runtime_id, runtime in own.items()}
    while True:
        try:
            TopologicalSorter(graph).prepare()
            return
        except CycleError as error:
            path = list(error.args[1])
        first = own[path[0]]
        bag.warning(
            CYCLE_CODE,
            "these runtimes wait on each other (schedule.needs / schedule.after): " + " → ".join(path)
            + "; none of them will run: break the cycle",
            file=first.file,
            field_path="schedule",
        )
        # Take the cycle out and look for another.
        for runtime_id in path:
            graph.pop(runtime_id, None)
        for waits in graph.values():
            waits.difference_update(path)
