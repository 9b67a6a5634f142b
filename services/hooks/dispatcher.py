"""Run one event's handlers with the contract's semantics.

Sequential events chain payloads through `replace`, and an abort ends the chain; parallel
events run every handler at once and ignore what they return. On guard events a failing
handler (raised, timed out, malformed result) blocks the operation: fail closed.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.hook_events import ENFORCE_GROUPS, EVENTS_BY_NAME, HookEvent, Mode
from shared.plugin_sdk import CancellationSignal, HookContext, HookRegistration


@dataclass(frozen=True)
class TraceEntry:
    event: str
    handler_plugin_id: str
    # ok | abort | error | timeout | invalid-result
    status: str
    message: str
    duration_us: int


@dataclass
class DispatchResult:
    aborted: bool
    reason: str
    payload: dict[str, Any]
    trace: list[TraceEntry] = field(default_factory=list)


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


class HandlerFailed(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class HandlerTable:
    """Registered handlers by event, in dispatch order: pre → normal → post, then registration order."""

    def __init__(self, registrations: Iterable[HookRegistration], sources: Mapping[str, str]) -> None:
        self._sources = dict(sources)
        by_event: dict[str, list[HookRegistration]] = {}
        for position, registration in enumerate(registrations):
            by_event.setdefault(registration.event, []).append(registration)
        group_rank = {group: rank for rank, group in enumerate(ENFORCE_GROUPS)}
        # sorted() is stable: plugins keep catalogue order, a plugin's handlers their registration order.
        self._by_event = {
            event: sorted(handlers, key=lambda h: group_rank[h.enforce]) for event, handlers in by_event.items()
        }

    def subscribers(self) -> dict[str, list[str]]:
        return {
            event: list(dict.fromkeys(h.plugin_id for h in handlers)) for event, handlers in self._by_event.items()
        }

    def handlers_for(self, event: str, execution: ExecutionContext) -> list[HookRegistration]:
        active = set(execution.active_plugin_ids)
        chosen = []
        for handler in self._by_event.get(event, ()):
            if handler.plugin_id not in active:
                continue
            # Community plugins' server code runs only once the player approved it for the session.
            if self._sources.get(handler.plugin_id) == "community" and handler.plugin_id not in execution.approved_plugin_ids:
                continue
            chosen.append(handler)
        return chosen


def _context_for(event: HookEvent, execution: ExecutionContext, handler: HookRegistration) -> HookContext:
    runtime_scoped = event.scope.value == "runtime"
    return HookContext(
        event=event.name,
        session_id=execution.session_id,
        turn_id="" if event.scope.value == "session" else execution.turn_id,
        locale=execution.locale,
        active_plugin_ids=execution.active_plugin_ids,
        signal=CancellationSignal(),
        plugin_id=execution.plugin_id if runtime_scoped else None,
        runtime_id=execution.runtime_id if runtime_scoped else None,
        logical_turn=execution.logical_turn,
        _own_settings=execution.plugin_settings.get(handler.plugin_id, {}),
    )


def _parse_result(event: HookEvent, result: Any) -> tuple[str, str, dict[str, Any]]:
    """(action, reason, replace) from what a handler returned; HandlerFailed when malformed."""
    if result is None:
        return "continue", "", {}
    if not isinstance(result, Mapping):
        raise HandlerFailed("invalid-result", f"returned {type(result).__name__}; return None or a dict with action")
    action = result.get("action", "continue")
    if action == "abort":
        reason = result.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise HandlerFailed("invalid-result", "returned abort without a reason string")
        return "abort", reason, {}
    if action != "continue":
        raise HandlerFailed("invalid-result", f"returned action {action!r}; use 'continue' or 'abort'")
    replace = result.get("replace", {})
    if replace is None:
        replace = {}
    if not isinstance(replace, Mapping):
        raise HandlerFailed("invalid-result", f"returned replace of type {type(replace).__name__}; it must be a dict")
    return "continue", "", {key: value for key, value in replace.items() if key in event.replace_fields}


async def _run_handler(
    event: HookEvent, execution: ExecutionContext, handler: HookRegistration, payload: dict[str, Any]
) -> tuple[str, str, dict[str, Any], TraceEntry | None]:
    """Run one handler; returns (action, reason, replace, trace entry or None when match said no)."""
    started = time.perf_counter()
    context = _context_for(event, execution, handler)

    def trace(status: str, message: str = "") -> TraceEntry:
        return TraceEntry(event.name, handler.plugin_id, status, message, int((time.perf_counter() - started) * 1e6))

    try:
        if handler.match is not None:
            try:
                matched = handler.match(copy.deepcopy(payload))
            except Exception as error:
                raise HandlerFailed("error", f"match raised {type(error).__name__}: {error}") from error
            if not matched:
                return "continue", "", {}, None
        try:
            outcome = handler.handler(context, copy.deepcopy(payload))
            if inspect.isawaitable(outcome):
                outcome = await asyncio.wait_for(outcome, handler.timeout_ms / 1000)
        except asyncio.TimeoutError as error:
            context.signal.abort("timeout")
            raise HandlerFailed("timeout", f"did not finish within {handler.timeout_ms} ms") from error
        except HandlerFailed:
            raise
        except Exception as error:
            raise HandlerFailed("error", f"raised {type(error).__name__}: {error}") from error
        action, reason, replace = _parse_result(event, outcome)
    except HandlerFailed as failure:
        return "failed", failure.message, {}, trace(failure.status, failure.message)
    return action, reason, replace, trace("abort" if action == "abort" else "ok", reason)


async def dispatch(
    table: HandlerTable, event_name: str, execution: ExecutionContext, payload: dict[str, Any]
) -> DispatchResult:
    event = EVENTS_BY_NAME[event_name]
    handlers = table.handlers_for(event_name, execution)
    result = DispatchResult(aborted=False, reason="", payload=payload)
    if not handlers:
        return result
    if event.mode is Mode.PARALLEL:
        outcomes = await asyncio.gather(*(_run_handler(event, execution, h, payload) for h in handlers))
        result.trace = [entry for *_, entry in outcomes if entry is not None]
        return result
    current = payload
    for handler in handlers:
        action, reason, replace, entry = await _run_handler(event, execution, handler, current)
        if entry is not None:
            result.trace.append(entry)
        if action == "failed":
            if event.guard:
                result.aborted = True
                result.reason = f"{event.name} hook of plugin {handler.plugin_id} failed ({reason}); blocked"
                break
            continue
        if action == "abort":
            if event.guard:
                result.aborted = True
                result.reason = reason
                break
            continue
        if replace:
            current = {**current, **replace}
    result.payload = current
    return result
