"""The gateway event-key bus: subscriptions by key or family, and one emission's handlers.

Handlers of one emission run one after another on one shared `InternalEvent` (family
subscribers first, then exact-key subscribers, each in catalogue and registration order).
A handler that raises is recorded and skipped. A handler that passes its timeout is not
cancelled: the emission stops waiting for it and goes on; the same holds for a wait budget
(gateway:shutdown, gateway:pre-restart), which bounds the producer's wait, never the work.
Every handler still running is joined when the hooks service shuts down (`join`), so a
handler that never finishes holds up the shutdown, as the spec says. A plain `def` handler
runs in a plugin thread (shared/plugin_threads.py) on its own copy of the event: its changes
to the context count once it returns within its timeout, so one that overruns cannot change
the context under the handlers after it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from shared.logs import get_logger
from shared.plugin_sdk import json_copy
from shared.plugin_sdk.event_keys import FAMILIES, KEYS_BY_NAME, InternalEvent, matches
from shared.plugin_sdk.registrar import EventKeyRegistration
from shared.plugin_threads import call_plugin_code
from shared.sandbox import is_sandboxed

log = get_logger(component="event_keys")


class EventTrace(NamedTuple):
    key: str
    handler_plugin_id: str
    # ok | error | timeout | invalid-context
    status: str
    message: str
    duration_us: int


@dataclass(frozen=True)
class Audience:
    """Whose handlers an emission runs: a session's plugins, or (session None) every loaded plugin."""

    session_id: str | None = None
    active_plugin_ids: frozenset[str] = frozenset()
    approved_plugin_ids: frozenset[str] = frozenset()


@dataclass
class Emission:
    completed: bool
    context: dict[str, Any]
    trace: list[EventTrace] = field(default_factory=list)
    handler_count: int = 0


def subscription_kind(key: str) -> str:
    if key in KEYS_BY_NAME:
        return "key"
    if key in FAMILIES:
        return "family"
    return "unknown"


class EventKeyTable:
    def __init__(self, registrations: Iterable[EventKeyRegistration], sources: Mapping[str, str]) -> None:
        self.registrations = tuple(registrations)
        self._sources = dict(sources)

    def handlers_for(self, key: str, audience: Audience) -> list[EventKeyRegistration]:
        family = key.split(":", 1)[0]
        ordered = [r for r in self.registrations if r.key == family and r.key != key] + [r for r in self.registrations if r.key == key]
        chosen = []
        for registration in ordered:
            if audience.session_id is None:
                # Gateway events carry no session data and have no player to approve anything: every
                # loaded plugin's handlers run (a community plugin is loaded only once some session approved it).
                allowed = True
            else:
                community = self._sources.get(registration.plugin_id) == "community"
                allowed = registration.plugin_id in audience.active_plugin_ids and (
                    not community or registration.plugin_id in audience.approved_plugin_ids
                )
            if allowed and matches(registration.key, key):
                chosen.append(registration)
        return chosen


def _json_safe(context: dict[str, Any]) -> bool:
    try:
        json.dumps(context)
    except (TypeError, ValueError):
        return False
    return True


class EventKeyBus:
    def __init__(self) -> None:
        # Handler tasks and emissions still running, joined at shutdown.
        self._running: set[asyncio.Task] = set()

    def _track(self, task: asyncio.Task) -> asyncio.Task:
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    async def emit(
        self, table: EventKeyTable, key: str, audience: Audience, context: dict[str, Any], *, budget_s: float | None = None
    ) -> Emission:
        handlers = table.handlers_for(key, audience)
        event = InternalEvent(key=key, session_key=audience.session_id, context=context)
        emission = Emission(completed=False, context=context, handler_count=len(handlers))
        if not handlers:
            emission.completed = True
            return emission
        job = self._track(asyncio.ensure_future(self._run(handlers, event, emission)))
        # asyncio.wait never cancels what it waits for: neither a budget nor a cancelled caller stops handlers.
        done, _ = await asyncio.wait({job}, timeout=budget_s)
        emission.completed = job in done
        emission.context = json_copy(event.context)
        return emission

    async def _run(self, handlers: list[EventKeyRegistration], event: InternalEvent, emission: Emission) -> None:
        for registration in handlers:
            started = time.perf_counter_ns()
            before = json_copy(event.context)
            status, message = "ok", ""
            # A sandboxed handler answers late too: like a thread's, its change counts only within its timeout.
            in_thread = not inspect.iscoroutinefunction(registration.handler) or is_sandboxed(registration.handler)
            handed = dataclasses.replace(event, context=json_copy(before)) if in_thread else event
            try:
                task = self._track(asyncio.ensure_future(call_plugin_code(registration.handler, handed)))
                task.add_done_callback(_log_late_failure(event.key, registration.plugin_id))
                done, _ = await asyncio.wait({task}, timeout=registration.timeout_ms / 1000)
                if not done:
                    status, message = "timeout", f"still running after {registration.timeout_ms} ms; not cancelled"
                else:
                    event.context = handed.context
                    if task.exception() is not None:
                        error = task.exception()
                        status, message = "error", f"raised {type(error).__name__}: {error}"
            except Exception as error:  # plugin code: recorded and skipped
                status, message = "error", f"raised {type(error).__name__}: {error}"
            if not isinstance(event.context, dict) or not _json_safe(event.context):
                event.context = before
                status, message = "invalid-context", "left the context as something other than JSON data; its change was undone"
            emission.trace.append(
                EventTrace(event.key, registration.plugin_id, status, message, (time.perf_counter_ns() - started) // 1000)
            )
            if status != "ok":
                log.warning("event_handler.failed", key=event.key, plugin_id=registration.plugin_id, status=status, message=message)

    async def join(self) -> None:
        """Wait for every handler still running (service shutdown)."""
        while self._running:
            await asyncio.wait(set(self._running))


def _log_late_failure(key: str, plugin_id: str) -> Callable[[asyncio.Task[Any]], None]:
    def check(task: asyncio.Task[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            # Also marks the exception as retrieved for a handler that failed after its timeout.
            log.info("event_handler.finished_with_error", key=key, plugin_id=plugin_id, error=repr(task.exception()))

    return check
