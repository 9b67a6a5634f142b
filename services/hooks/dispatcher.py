"""Run one event's handlers with the contract's semantics.

Sequential events chain payloads through `replace`, and an abort ends the chain; parallel
events run every handler at once and ignore what they return. On guard events a failing
handler (raised, timed out, malformed result) blocks the operation: fail closed.

The loop is written for speed (see bench/hook_dispatch.py): an `async def` handler is called
directly, with no deep copy; its payload is a PrivatePayload that copies nested values only
when the handler reads them. On sequential events its first step runs in the dispatch loop with
no timer (nothing can pass a deadline without yielding to the loop, and most handlers never
suspend); one that suspends gets a timer on the dispatch's own task for what is left of its
timeout. On parallel events each awaitable runs under its own timer. Any other handler runs in
a plugin thread (shared/plugin_threads.py) under the same timer, so a slow one fails like a slow
async one and never stalls the loop. The handlers an event runs for a plugin set are worked out
once per table (HandlerTable.handlers_for), and the view handlers share is one tuple.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import types
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from types import CoroutineType
from typing import Any, NamedTuple, NoReturn

from services.hooks.common.hook_results import HandlerFailed, parse_result
from services.hooks.dispatch_batches import NOT_BATCHED, Outcome, Plan, finish_batch, plan_batches, run_batch
from shared.hook_events import ENFORCE_GROUPS, EVENTS_BY_NAME, HookEvent, Mode, Scope
from shared.plugin_sdk import ExecutionView, HookContext, HookRegistration, PrivatePayload
from shared.plugin_sdk.hook_match import DeclarativeMatch
from shared.plugin_threads import call_sync

_perf_ns = time.perf_counter_ns
_new_view = tuple.__new__
# The kernel's own hooks register under this id: they always run, first in their group.
FRAMEWORK = "framework"
# Plugin sets whose handler lists a table keeps; past that it starts over (a bound, not an LRU: rarely reached).
CHOSEN_KEPT = 1024


class TraceEntry(NamedTuple):
    event: str
    handler_plugin_id: str
    # ok | abort | error | timeout | invalid-result
    status: str
    message: str
    duration_us: int


@dataclass(slots=True)
class DispatchResult:
    aborted: bool
    reason: str
    payload: dict[str, Any]
    # Plain tuples in TraceEntry's field order while dispatching; `trace` names them on read.
    raw_trace: list[tuple] = field(default_factory=list)

    @property
    def trace(self) -> list[TraceEntry]:
        return [TraceEntry(*entry) for entry in self.raw_trace]


@dataclass(frozen=True)
class ExecutionContext:
    """What the caller knows about the execution; becomes each handler's HookContext."""

    session_id: str
    turn_id: str
    locale: str
    active_plugin_ids: tuple[str, ...]
    approved_plugin_ids: frozenset[str] = frozenset()
    plugin_id: str | None = None
    runtime_id: str | None = None
    logical_turn: int | None = None
    plugin_settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Which execution of the runtime (runtime-scoped events; see hooks.proto HookContext).
    execution_id: str = ""
    root_execution_id: str = ""
    subagent_call_id: str = ""
    parent_runtime_id: str = ""

    def view(self, event: HookEvent) -> ExecutionView:
        # Built once per dispatch, on the hot path: the tuple itself, in ExecutionView's field order (a
        # NamedTuple's keyword __new__ costs as much again).
        if event.scope is Scope.RUNTIME:
            return _new_view(ExecutionView, (
                event.name, self.session_id, self.turn_id, self.locale, self.active_plugin_ids, self.plugin_id,
                self.runtime_id, self.logical_turn, self.plugin_settings, self.execution_id, self.root_execution_id,
                self.subagent_call_id, self.parent_runtime_id,
            ))
        turn_id = "" if event.scope is Scope.SESSION else self.turn_id
        return _new_view(ExecutionView, (
            event.name, self.session_id, turn_id, self.locale, self.active_plugin_ids, None, None, self.logical_turn,
            self.plugin_settings, None, None, None, None,
        ))


class HandlerSkipped(Exception):
    """A sandboxed handler whose `match` (run in its worker) did not accept the payload."""


class HandlerTable:
    """Registered handlers by event, in dispatch order: pre → normal → post; within a group the
    framework's own hooks first, then plugin handlers in registration order."""

    def __init__(self, registrations: Iterable[HookRegistration], sources: Mapping[str, str]) -> None:
        self._sources = dict(sources)
        by_event: dict[str, list[HookRegistration]] = {}
        for registration in registrations:
            by_event.setdefault(registration.event, []).append(registration)
        group_rank = {group: rank for rank, group in enumerate(ENFORCE_GROUPS)}
        # sorted() is stable: plugins keep catalogue order, a plugin's handlers their registration order.
        self._by_event = {
            event: tuple(sorted(handlers, key=lambda h: (group_rank[h.enforce], h.plugin_id != FRAMEWORK)))
            for event, handlers in by_event.items()
        }
        # handlers_for's answers by (event, active plugins, approved plugins).
        self._chosen: dict[tuple[str, tuple[str, ...], frozenset[str]], tuple[HookRegistration, ...]] = {}
        # plan_for's: which of those handlers go to their worker together (dispatch_batches.py), by the same key.
        self._plans: dict[tuple[str, tuple[str, ...], frozenset[str]], Plan] = {}

    def subscribers(self) -> dict[str, list[str]]:
        return {
            event: list(dict.fromkeys(h.plugin_id for h in handlers)) for event, handlers in self._by_event.items()
        }

    def matched(self) -> dict[str, dict[str, list[DeclarativeMatch]]]:
        """By event, the plugins whose every handler of it has a declarative match, with those matches:
        a caller that tests them can skip an event none of them accepts."""
        found: dict[str, dict[str, list[DeclarativeMatch]]] = {}
        for event, handlers in self._by_event.items():
            by_plugin: dict[str, list[Any]] = {}
            for handler in handlers:
                by_plugin.setdefault(handler.plugin_id, []).append(handler.match)
            declared = {plugin: matches for plugin, matches in by_plugin.items()
                        if all(type(match) is DeclarativeMatch for match in matches)}
            if declared:
                found[event] = declared
        return found

    def observers(self) -> dict[str, list[str]]:
        """By event, the plugins whose every handler of it only observes (observe=True)."""
        found: dict[str, list[str]] = {}
        for event, handlers in self._by_event.items():
            watching: dict[str, bool] = {}
            for handler in handlers:
                watching[handler.plugin_id] = watching.get(handler.plugin_id, True) and handler.observe
            if any(watching.values()):
                found[event] = [plugin for plugin, only in watching.items() if only]
        return found

    def handlers_for(self, event: str, execution: ExecutionContext) -> tuple[HookRegistration, ...]:
        """The handlers that run for `event` in this execution's plugin set (cached: a table never changes,
        a reload builds a new one, and sessions share a handful of plugin sets)."""
        if event not in self._by_event:
            return ()
        key = (event, execution.active_plugin_ids, execution.approved_plugin_ids)
        chosen = self._chosen.get(key)
        if chosen is None:
            if len(self._chosen) >= CHOSEN_KEPT:
                self._chosen.clear()
            chosen = self._chosen[key] = self._choose(self._by_event[event], execution)
        return chosen

    def plan_for(self, event: HookEvent, execution: ExecutionContext) -> tuple[tuple[HookRegistration, ...], Plan]:
        """handlers_for, and which of them travel to their worker as one batch (empty for in-process handlers)."""
        handlers = self.handlers_for(event.name, execution)
        key = (event.name, execution.active_plugin_ids, execution.approved_plugin_ids)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= CHOSEN_KEPT:
                self._plans.clear()
            plan = self._plans[key] = plan_batches(event, handlers)
        return handlers, plan

    def _choose(self, handlers: tuple[HookRegistration, ...], execution: ExecutionContext) -> tuple[HookRegistration, ...]:
        active = execution.active_plugin_ids
        approved = execution.approved_plugin_ids
        sources = self._sources
        # Community plugins' server code runs only once the player approved it for the session.
        return tuple(
            h for h in handlers
            if h.plugin_id == FRAMEWORK
            or (h.plugin_id in active and (h.plugin_id in approved or sources.get(h.plugin_id) != "community"))
        )


def _parse_result(event: HookEvent, result: Any) -> tuple[str, str, dict[str, Any] | None]:
    """(action, reason, replace) from what a handler returned; HandlerFailed when malformed."""
    return parse_result(event.replace_fields, result)


async def _in_thread(handler: HookRegistration, context: HookContext, payload: PrivatePayload) -> Any:
    # The signal is made here, on the loop, so the handler's thread and the timer share one.
    _ = context.signal
    return await call_sync(handler.handler, context, payload)


def _overrun_note(handler: HookRegistration) -> str:
    if handler.sandboxed:
        return str(getattr(handler.handler, "overrun_note", ""))
    return "" if handler.is_async else "; its thread runs on until it returns, and its result is discarded"


def _failure(error: BaseException, handler: HookRegistration, context: HookContext) -> BaseException:
    """What a handler's exception (or its timer's) becomes; CancelledError and the like stay as they are."""
    if isinstance(error, TimeoutError):
        context.abort("timeout")
        return HandlerFailed("timeout", f"did not finish within {handler.timeout_ms} ms{_overrun_note(handler)}")
    if isinstance(error, asyncio.CancelledError):
        context.abort("cancelled")
        return error
    if isinstance(error, (HandlerFailed, HandlerSkipped)) or not isinstance(error, Exception):
        return error
    return HandlerFailed("error", f"raised {type(error).__name__}: {error}")


async def _await_handler(awaitable: Any, handler: HookRegistration, context: HookContext, timeout_s: float) -> Any:
    try:
        # A timer on this task, not a task per handler as wait_for makes.
        async with asyncio.timeout(timeout_s):
            return await awaitable
    except BaseException as error:
        _raise_failure(error, handler, context)


@types.coroutine
def _rest_of(coroutine: Coroutine[Any, Any, Any], waiting_on: Any) -> Generator[Any, Any, Any]:
    """Awaits the rest of a coroutine that suspended on its first step (waiting on `waiting_on`), as
    `await coroutine` would have: what the task sends or throws goes on to the coroutine."""
    while True:
        try:
            sent = yield waiting_on
        except GeneratorExit:
            coroutine.close()
            raise
        except BaseException as error:
            try:
                waiting_on = coroutine.throw(error)
            except StopIteration as done:
                return done.value
        else:
            try:
                waiting_on = coroutine.send(sent)
            except StopIteration as done:
                return done.value


def _raise_failure(error: BaseException, handler: HookRegistration, context: HookContext) -> NoReturn:
    failure = _failure(error, handler, context)
    if failure is error:
        raise error
    raise failure from error


async def _rest_under_timer(
    coroutine: Coroutine[Any, Any, Any], waiting_on: Any, handler: HookRegistration, context: HookContext, started: int
) -> Any:
    """A sequential event's handler coroutine that suspended on its first step: the rest of it under its timer,
    for what is left of its timeout. The first step ran in the dispatch loop with no timer at all: nothing
    can pass a deadline without yielding to the loop, and most handlers finish without ever suspending."""
    left_s = handler.timeout_ms / 1000 - (_perf_ns() - started) / 1e9
    return await _await_handler(_rest_of(coroutine, waiting_on), handler, context, left_s)


def _matches(match: Callable[[Any], bool] | DeclarativeMatch, payload: dict[str, Any], view: ExecutionView) -> bool:
    """A declarative match is tested here; a match function gets its own copy of the payload, and one
    that raises fails the handler."""
    if isinstance(match, DeclarativeMatch):
        return match.accepts(payload, {"plugin_id": view.plugin_id, "runtime_id": view.runtime_id, "locale": view.locale})
    try:
        return bool(match(PrivatePayload(payload)))
    except Exception as error:
        raise HandlerFailed("error", f"match raised {type(error).__name__}: {error}") from error


async def _finish(
    event: HookEvent, handler: HookRegistration, awaitable: Any, context: HookContext, started: int
) -> tuple | None:
    """A parallel event's handler that returned an awaitable: its trace entry once it is done (None: skipped)."""
    try:
        action, reason, _ = _parse_result(event, await _await_handler(awaitable, handler, context, handler.timeout_ms / 1000))
    except HandlerSkipped:
        return None
    except HandlerFailed as failure:
        return (event.name, handler.plugin_id, failure.status, failure.message, (_perf_ns() - started) // 1000)
    return (event.name, handler.plugin_id, "abort" if action == "abort" else "ok", reason, (_perf_ns() - started) // 1000)


def _batched(event: HookEvent, handler: HookRegistration, got: tuple, result: DispatchResult,
             current: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """A sequential event's handler whose outcome came in a batch: traced and applied as if it had run alone;
    (whether the dispatch stops here, the payload for the next handler)."""
    status, value, message, took = got
    if status == "skip":
        return False, current
    try:
        if status != "ok":
            raise HandlerFailed(status, message)
        action, reason, replace = _parse_result(event, value)
    except HandlerFailed as failure:
        result.raw_trace.append((event.name, handler.plugin_id, failure.status, failure.message, took))
        if event.guard and not handler.observe:
            result.aborted = True
            result.reason = f"{event.name} hook of plugin {handler.plugin_id} failed ({failure.message}); blocked"
            return True, current
        return False, current
    result.raw_trace.append((event.name, handler.plugin_id, "abort" if action == "abort" else "ok", reason, took))
    if handler.observe:
        return False, current
    if action == "abort":
        if event.guard:
            result.aborted = True
            result.reason = reason
            return True, current
        return False, current
    return False, {**current, **replace} if replace else current


async def dispatch(  # noqa: C901 -- the hot path: one flat pass over handlers (timeouts, fail-closed, replace); split costs per-call overhead
    table: HandlerTable, event_name: str, execution: ExecutionContext, payload: dict[str, Any],
    prefetched: Mapping[int, Outcome] | None = None,
) -> DispatchResult:
    """Run the event's handlers; `prefetched`: outcomes of some of them already run in their workers, by
    id(handler) (DispatchObserved's batches across events: observed_batches.py)."""
    event = EVENTS_BY_NAME[event_name]
    handlers, plan = table.plan_for(event, execution)
    result = DispatchResult(False, "", payload, [])
    if not handlers:
        return result
    view = execution.view(event)
    trace = result.raw_trace
    name = event.name
    parallel = event.mode is Mode.PARALLEL
    # Parallel: every awaitable (a thread's included) runs concurrently, each with its timer.
    waiting: list[Any] = []
    current = payload
    # Locals: this loop runs per handler and is measured against pluggy (bench/hook_dispatch.py).
    perf, make_context, private, append = _perf_ns, HookContext, PrivatePayload, trace.append
    # Outcomes of a batch (a plugin's handlers in one round trip to its worker), by handler, not read yet.
    answered = dict(prefetched) if prefetched else {}
    # One clock read per handler: each handler's end is the next one's start.
    now = perf()
    for handler in handlers:
        started = now
        if plan or answered:
            got = answered.pop(id(handler), None) if answered else None
            batch = plan.get(id(handler), NOT_BATCHED) if got is None and plan else NOT_BATCHED
            if batch is not NOT_BATCHED:
                if parallel:
                    if batch is not None:
                        waiting.append(finish_batch(event, batch, view, current))
                    now = perf()
                    continue
                if batch is not None:
                    # Added to what is not read yet (prefetched watchers of other plugins keep theirs).
                    answered.update(await run_batch(batch, view, current, event))
                got = answered.pop(id(handler), None)
            if got is not None:
                stop, current = _batched(event, handler, got, result, current)
                now = perf()
                if stop:
                    break
                continue
        context = make_context(view, handler.plugin_id)
        try:
            if handler.match is not None and not _matches(handler.match, current, view):
                now = perf()
                continue
            try:
                if handler.is_async:
                    # A sandboxed handler's payload is copied on its way to the worker.
                    outcome = handler.handler(context, current if handler.sandboxed else private(current))
                else:
                    outcome = _in_thread(handler, context, private(current))
            except Exception as error:
                raise HandlerFailed("error", f"raised {type(error).__name__}: {error}") from error
            if outcome is None:
                now = perf()
                append((name, handler.plugin_id, "ok", "", (now - started) // 1000))
                continue
            if type(outcome) is CoroutineType and not parallel:
                # Its first step runs here, untimed; one that suspends finishes under its timer.
                try:
                    waiting_on = outcome.send(None)
                except StopIteration as done:
                    outcome = done.value
                except BaseException as error:
                    _raise_failure(error, handler, context)
                else:
                    outcome = await _rest_under_timer(outcome, waiting_on, handler, context, started)
            elif type(outcome) is not dict and inspect.isawaitable(outcome):
                if parallel:
                    waiting.append(_finish(event, handler, outcome, context, started))
                    now = perf()
                    continue
                outcome = await _await_handler(outcome, handler, context, handler.timeout_ms / 1000)
            action, reason, replace = ("continue", "", None) if outcome is None else _parse_result(event, outcome)
        except HandlerSkipped:
            now = perf()
            continue
        except HandlerFailed as failure:
            now = perf()
            append((name, handler.plugin_id, failure.status, failure.message, (now - started) // 1000))
            if event.guard and not parallel and not handler.observe:
                result.aborted = True
                result.reason = f"{name} hook of plugin {handler.plugin_id} failed ({failure.message}); blocked"
                break
            continue
        now = perf()
        append((name, handler.plugin_id, "abort" if action == "abort" else "ok", reason, (now - started) // 1000))
        if parallel or handler.observe:  # an observer only watches: what it returns changes nothing
            continue
        if action == "abort":
            if event.guard:
                result.aborted = True
                result.reason = reason
                break
        elif replace:
            current = {**current, **replace}
    if waiting:
        for entry in await asyncio.gather(*waiting):
            if type(entry) is list:
                trace.extend(entry)
            elif entry is not None:
                trace.append(entry)
    if not parallel:
        result.payload = current
    return result
