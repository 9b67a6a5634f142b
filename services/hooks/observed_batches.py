"""DispatchObserved's watchers in one round trip per plugin: the events a turn held for its watchers
(docs/hooks.md, "Watching") are dispatched in order as before, but each sandboxed plugin whose watchers take
two or more of them has them all run first, event after event, in one call to its worker; the dispatch of each
event then reads their outcomes (dispatcher.py `prefetched`) as if they had run alone. Plugins run at once, each
in its own worker; a plugin's watchers keep the events' order. Only events whose handlers all watch are taken
(a watcher after a handler that may `replace` must see its change, so it runs in the event's own dispatch).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from services.hooks.dispatch_batches import BatchRunner, Outcome, runner_of
from services.hooks.dispatcher import ExecutionContext, HandlerTable
from shared.hook_events import EVENTS_BY_NAME, HookEvent
from shared.plugin_sdk import ExecutionView, HookRegistration

Part = tuple[Sequence[HookRegistration], ExecutionView, dict[str, Any], HookEvent]


def _parts(table: HandlerTable, items: Sequence[tuple[str, ExecutionContext, dict[str, Any]]],
           ) -> dict[int, tuple[BatchRunner, list[int], list[Part]]]:
    """By plugin (its batch runner): the held events it watches (their index) and its watchers of each."""
    found: dict[int, tuple[BatchRunner, list[int], list[Part]]] = {}
    for index, (name, execution, payload) in enumerate(items):
        event = EVENTS_BY_NAME[name]
        handlers, _ = table.plan_for(event, execution)
        if not handlers or not all(handler.observe for handler in handlers):
            continue
        by_runner: dict[int, tuple[BatchRunner, list[HookRegistration]]] = {}
        for handler in handlers:
            runner = runner_of(handler)
            if runner is not None:
                by_runner.setdefault(id(runner), (runner, []))[1].append(handler)
        view = execution.view(event)
        for key, (runner, members) in by_runner.items():
            entry = found.setdefault(key, (runner, [], []))
            entry[1].append(index)
            entry[2].append((members, view, payload, event))
    return found


async def observed_outcomes(table: HandlerTable, items: Sequence[tuple[str, ExecutionContext, dict[str, Any]]],
                            ) -> list[dict[int, Outcome]]:
    """For each held event, the outcomes of the watchers already run (by id(handler)); a plugin that watches one
    event only is left to that event's dispatch (one round trip either way)."""
    found: list[dict[int, Outcome]] = [{} for _ in items]
    runs = [(indexes, parts, runner.run_observed(parts))
            for runner, indexes, parts in _parts(table, items).values() if len(indexes) >= 2]
    results = await asyncio.gather(*(run for _, _, run in runs))
    for (indexes, parts, _), outcomes in zip(runs, results, strict=True):
        for index, (members, _, _, _), event_outcomes in zip(indexes, parts, outcomes, strict=True):
            for member, outcome in zip(members, event_outcomes, strict=False):
                found[index][id(member)] = outcome
    return found
