"""Which of one event's handlers travel to their worker together: a plugin's sandboxed handlers of one Dispatch
go as ONE round trip (sandboxed_batches.py runs it), each still under its own timeout and fault accounting.

- On a sequential event, a run of consecutive handlers of one plugin (the table's order keeps a plugin's handlers
  of one enforce group together) is one batch; the worker chains them as the dispatcher would (each sees the
  ones before it), and the dispatcher reads their outcomes in order as if each had run alone (dispatcher.py).
- On a parallel event, all of a plugin's handlers are one batch, run at once in the worker, at the place of its
  first handler among the event's awaitables.

A handler whose outcome a batch did not bring (the worker stopped or timed out before it) runs alone after.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from services.hooks.common.hook_results import HandlerFailed, parse_result
from shared.hook_events import HookEvent, Mode
from shared.plugin_sdk import ExecutionView, HookRegistration

# plan.get(id(handler), NOT_BATCHED): a handler that runs alone.
NOT_BATCHED: Any = object()

# One handler's outcome from its batch: (status, value, message, microseconds it ran).
Outcome = tuple[str, Any, str, int]


class BatchRunner(Protocol):
    """What runs a batch: the plugin's stand-in on the host (sandboxed_batches.HookBatches)."""

    async def run(self, members: Sequence[HookRegistration], view: ExecutionView, payload: dict[str, Any],
                  event: HookEvent) -> list[Outcome]: ...

    async def run_observed(self, events: Sequence[tuple[Sequence[HookRegistration], ExecutionView, dict[str, Any], HookEvent]],
                           ) -> list[list[Outcome]]: ...


class HookBatch:
    __slots__ = ("members", "runner")

    def __init__(self, runner: BatchRunner, members: tuple[HookRegistration, ...]) -> None:
        self.runner = runner
        self.members = members


# id(handler) -> its batch (at the batch's first handler) or None (at the others); handlers alone are absent.
Plan = dict[int, "HookBatch | None"]


def runner_of(handler: HookRegistration) -> BatchRunner | None:
    """What runs the handler's batches (its plugin's worker), or None: it runs alone (in this process)."""
    return getattr(handler.handler, "batch", None) if handler.sandboxed else None


def plan_batches(event: HookEvent, handlers: Sequence[HookRegistration]) -> Plan:
    groups: list[list[HookRegistration]] = []
    if event.mode is Mode.PARALLEL:
        by_runner: dict[int, list[HookRegistration]] = {}
        for handler in handlers:
            runner = runner_of(handler)
            if runner is not None:
                by_runner.setdefault(id(runner), []).append(handler)
        groups = list(by_runner.values())
    else:
        for handler in handlers:
            runner = runner_of(handler)
            if runner is not None and groups and runner_of(groups[-1][-1]) is runner:
                groups[-1].append(handler)
            else:
                groups.append([handler] if runner is not None else [])
    plan: Plan = {}
    for members in groups:
        if len(members) < 2:
            continue
        runner = runner_of(members[0])
        if runner is None:
            continue
        plan[id(members[0])] = HookBatch(runner, tuple(members))
        for member in members[1:]:
            plan[id(member)] = None
    return plan


async def run_batch(batch: HookBatch, view: ExecutionView, payload: dict[str, Any], event: HookEvent) -> dict[int, Outcome]:
    """A sequential event's batch: each member's outcome by id(handler) (a member it did not reach is absent)."""
    outcomes = await batch.runner.run(batch.members, view, payload, event)
    return {id(member): outcome for member, outcome in zip(batch.members, outcomes, strict=False)}


async def finish_batch(event: HookEvent, batch: HookBatch, view: ExecutionView, payload: dict[str, Any]) -> list[tuple]:
    """A parallel event's batch: the trace entries of its members (skipped ones have none)."""
    started = time.perf_counter_ns()
    outcomes = await batch.runner.run(batch.members, view, payload, event)
    entries = []
    for member, (status, value, message, took) in zip(batch.members, outcomes, strict=False):
        if status == "skip":
            continue
        try:
            if status != "ok":
                raise HandlerFailed(status, message)
            action, reason, _ = parse_result(event.replace_fields, value)
        except HandlerFailed as failure:
            entries.append((event.name, member.plugin_id, failure.status, failure.message, took))
            continue
        entries.append((event.name, member.plugin_id, "abort" if action == "abort" else "ok", reason, took))
    # A parallel batch always reports every member (a timeout, or the worker's failure, included).
    took = (time.perf_counter_ns() - started) // 1000
    entries.extend((event.name, member.plugin_id, "error", "its worker gave no outcome", took)
                   for member in batch.members[len(outcomes):])
    return entries
