"""The `hooks` operation: several handlers of this plugin for one event in one round trip (a batch), each under its
own timeout, with the dispatcher's rules (services/hooks/dispatcher.py, docs/hooks.md):

- a chain (sequential event) runs them in order; each sees the payload as the ones before left it (their
  `replace`, limited to the event's replace fields; an observer's changes nothing); on a guard event an abort,
  or a failure of a handler that does not only observe, ends the chain there (the host blocks the operation);
- otherwise (parallel event) they run at once, each on the payload as sent.

Each handler's outcome goes to the host as it ends (a note, `hooks.outcome`), so a handler that holds the
worker's loop past its time is known to the host as the one that timed out, and those before it stand. The
reply only says the batch ended, and whether code of a handler that timed out still runs in a thread.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from services.hooks.common.hook_results import HandlerFailed, parse_result
from services.hooks.common.worker_messages import HookOutcome, HooksArgs, HooksReply
from shared.plugin_sdk import HookContext, HookRegistration, PrivatePayload
from shared.plugin_sdk.hook_match import DeclarativeMatch
from shared.plugin_threads import threads_running
from shared.sandbox.worker_server import Call, WorkerServer


def _matches(registration: HookRegistration, payload: dict[str, Any], context: HookContext) -> bool:
    match = registration.match
    if match is None:
        return True
    if isinstance(match, DeclarativeMatch):
        view = context._view
        return match.accepts(payload, {"plugin_id": view.plugin_id, "runtime_id": view.runtime_id, "locale": view.locale})
    try:
        return bool(match(PrivatePayload(payload)))
    except Exception as error:  # plugin code
        raise HandlerFailed("error", f"match raised {type(error).__name__}: {error}") from error


async def _run_one(server: WorkerServer, call: Call, registration: HookRegistration, context: HookContext,
                   payload: dict[str, Any], timeout_ms: int) -> HookOutcome:
    started = time.perf_counter_ns()
    try:
        if not _matches(registration, payload, context):
            return HookOutcome("skip")
        async with asyncio.timeout(timeout_ms / 1000):
            value = await server.run_plugin(call, registration.handler, context, PrivatePayload(payload))
    except HandlerFailed as failed:
        return HookOutcome(failed.status, message=failed.message, us=(time.perf_counter_ns() - started) // 1000)
    except TimeoutError:
        context.abort("timeout")
        return HookOutcome("timeout", us=(time.perf_counter_ns() - started) // 1000)
    except Exception as error:  # plugin code
        return HookOutcome("error", message=f"raised {type(error).__name__}: {error}", us=(time.perf_counter_ns() - started) // 1000)
    return HookOutcome("ok", v=value, us=(time.perf_counter_ns() - started) // 1000)


def _tell(server: WorkerServer, call: Call, position: int, outcome: HookOutcome) -> HookOutcome:
    """The outcome to the host as soon as it is known; a return value that is not JSON data is the handler's
    invalid result."""
    try:
        server.note(call, "hooks.outcome", position, outcome)
    except (TypeError, ValueError) as error:
        outcome = HookOutcome("invalid-result", message=f"returned a value that is not JSON data ({error})", us=outcome.us)
        server.note(call, "hooks.outcome", position, outcome)
    return outcome


async def _chain(server: WorkerServer, call: Call, args: HooksArgs, registrations: list[HookRegistration],
                 contexts: list[HookContext], offset: int) -> None:
    current = args.payload
    fields = frozenset(args.replace_fields)
    for position, registration in enumerate(registrations):
        outcome = _tell(server, call, offset + position, await _run_one(server, call, registration, contexts[position], current,
                                                               args.timeouts_ms[position]))
        if outcome.status == "skip":
            continue
        try:
            if outcome.status != "ok":
                raise HandlerFailed(outcome.status, outcome.message)
            action, _, replace = parse_result(fields, outcome.v)
        except HandlerFailed:
            if args.guard and not registration.observe:
                return
            continue
        if registration.observe:
            continue
        if action == "abort":
            if args.guard:
                return
        elif replace:
            current = {**current, **replace}


async def run_batch(server: WorkerServer, call: Call, args: HooksArgs, registrations: list[HookRegistration],
                    contexts: list[HookContext], offset: int = 0) -> None:
    """One event's handlers; their outcomes are told at `offset` + their position (several events in one call)."""
    if args.chain:
        await _chain(server, call, args, registrations, contexts, offset)
        return

    async def one(position: int) -> None:
        _tell(server, call, offset + position, await _run_one(server, call, registrations[position], contexts[position],
                                                              args.payload, args.timeouts_ms[position]))

    await asyncio.gather(*(one(position) for position in range(len(registrations))))


def batch_ended(call: Call) -> HooksReply:
    return HooksReply(running=threads_running(call.id) > 0)
