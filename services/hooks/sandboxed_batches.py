"""A sandboxed plugin's handlers of one event in one round trip to its worker (the `hooks` operation,
plugin_side/hook_batches.py; which handlers: dispatch_batches.py), each still under its own timeout and fault
accounting:

- each handler's outcome comes as it ends (a `hooks.outcome` note, decoded as a HookOutcome: a malformed one is
  the worker's malformed frame), so the ones that ended before a failure stand;
- a handler that passed its time in the worker is that handler's `timeout`; the worker is then replaced (as
  after a lone handler's timeout: code of it may run on in a thread);
- the host bounds the whole batch too (the sum of a chain's timeouts, the longest of a parallel batch's, plus
  the stop grace): past it the worker's loop is held (a busy handler) and the handler that has no outcome yet is
  the one that timed out; the worker is stopped and replaced, and the handlers after it run alone (dispatcher).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from services.hooks.common.worker_messages import HookOutcome, HooksArgs, HooksReply, ObservedArgs
from services.hooks.dispatch_batches import Outcome
from services.hooks.hook_state import StoreState, state_capability
from services.hooks.sandboxed_hookspecs import view_of
from shared.hook_events import HookEvent, Mode
from shared.plugin_sdk import ExecutionView, HookRegistration
from shared.plugin_sdk.session_state import STATE_BACKEND
from shared.sandbox import PluginWorkers, RemoteError, WorkerGone
from shared.sandbox.protocol import ProtocolError

OVERRUN = "; its worker process is replaced and stopped"


class HookBatches:
    """One plugin generation's batches (the `batch` of its SandboxedHook stand-ins)."""

    def __init__(self, plugin_id: str, workers: PluginWorkers, generation: int) -> None:
        self.plugin_id = plugin_id
        self.workers = workers
        self.generation = generation

    def _args(self, members: Sequence[HookRegistration], view: ExecutionView, payload: dict[str, Any],
              event: HookEvent) -> HooksArgs:
        return HooksArgs(items=[member.handler.index for member in members],  # type: ignore[attr-defined]
                         timeouts_ms=[member.timeout_ms for member in members], view=view_of(view), payload=payload,
                         chain=event.mode is not Mode.PARALLEL, guard=event.guard, replace_fields=list(event.replace_fields),
                         gen=self.generation, settings=dict(view.plugin_settings.get(self.plugin_id, {})))

    async def run(self, members: Sequence[HookRegistration], view: ExecutionView, payload: dict[str, Any],
                  event: HookEvent) -> list[Outcome]:
        """One event's handlers of this plugin (Dispatch): their outcomes in order (fewer when the chain ended early)."""
        args = self._args(members, view, payload, event)
        return (await self._round_trip("hooks", args, [(members, args)]))[0]

    async def run_observed(self, events: Sequence[tuple[Sequence[HookRegistration], ExecutionView, dict[str, Any], HookEvent]],
                           ) -> list[list[Outcome]]:
        """Several held events' handlers of this plugin (DispatchObserved), event after event, in one round trip."""
        parts = [(members, self._args(members, view, payload, event)) for members, view, payload, event in events]
        return await self._round_trip("observed", ObservedArgs([args for _, args in parts]), parts)

    async def _round_trip(self, op: str, args: Any, parts: list[tuple[Sequence[HookRegistration], HooksArgs]]) -> list[list[Outcome]]:
        received: dict[int, HookOutcome] = {}
        total = sum(len(members) for members, _ in parts)
        grace_s = self.workers.pool.settings.sandbox_stop_grace_ms / 1000
        # One chain: the host's bound follows it handler by handler (note); else the sum of each event's bound.
        timeouts_s = [timeout / 1000 for timeout in parts[0][1].timeouts_ms] if len(parts) == 1 and parts[0][1].chain else None
        timer: asyncio.Timeout | None = None

        def note(op: str, values: list[Any]) -> None:
            if op != "hooks.outcome" or len(values) != 2 or type(values[0]) is not int or not 0 <= values[0] < total:
                raise ProtocolError(f"a batch's note is ({op!r}, position, outcome) for one of {total} handlers")
            try:
                received[values[0]] = msgspec.convert(values[1], HookOutcome)
            except msgspec.ValidationError as error:
                raise ProtocolError(f"a handler's outcome is not the protocol's: {error}") from error
            if timeouts_s is not None and timer is not None and values[0] + 1 < total:
                # The next handler of the chain starts now: the host's bound is its own time (and the grace).
                timer.reschedule(asyncio.get_running_loop().time() + timeouts_s[values[0] + 1] + grace_s)

        bounds_s = [sum(part.timeouts_ms) / 1000 if part.chain else max(part.timeouts_ms) / 1000 for _, part in parts]
        backend = STATE_BACKEND.get()
        session_id = parts[0][1].view.session_id
        capabilities = state_capability(backend, session_id, self.plugin_id) if isinstance(backend, StoreState) else None
        failure: tuple[str, str] | None = None
        worker = None
        try:
            worker = await self.workers.worker()
            first_s = timeouts_s[0] if timeouts_s is not None else sum(bounds_s)
            async with asyncio.timeout(first_s + grace_s) as timer:
                # The call's deadline lies past every bound of the timer: the caller's cancellation is no fault.
                reply = await worker.call(op, args, reply=HooksReply, notes=note, capabilities=capabilities,
                                          deadline=time.monotonic() + sum(bounds_s) + grace_s * (total + 1))
        except TimeoutError:
            # The worker's own timer did not answer in time: its loop is held by the handler that has no outcome. It is
            # stopped now, so that the handlers after it run alone on a fresh worker.
            failure = ("timeout", "")
            if worker is not None:
                worker.owner.fault(worker, "a handler held its loop past its timeout")
                worker.kill("a handler held its loop past its timeout")
        except WorkerGone as gone:
            failure = ("error", f"failed: {gone}")
        except RemoteError as error:
            failure = ("error", f"failed: {error}")
        else:
            if reply.running or any(outcome.status == "timeout" for outcome in received.values()):
                worker.owner.fault(worker, "a call's timeout" + (": its code ran on in a thread" if reply.running else ""))
                worker.retire()
        return _outcomes(parts, received, failure)


def _outcomes(parts: list[tuple[Sequence[HookRegistration], HooksArgs]], received: dict[int, HookOutcome],
              failure: tuple[str, str] | None) -> list[list[Outcome]]:
    """Each event's outcomes in order. Where outcomes stop: a chain that ended early (an abort, a guard's failure)
    stops there too; after a failure of the call, the handler that had none is that failure (every such one of a
    parallel event), and what comes after it was not reached: it runs alone (dispatcher.py)."""
    found: list[list[Outcome]] = []
    offset = 0
    for members, args in parts:
        outcomes: list[Outcome] = []
        found.append(outcomes)
        missing = False
        for position, member in enumerate(members):
            outcome = received.get(offset + position)
            if outcome is None:
                missing = True
                if failure is None:
                    break
                status, message = failure
                outcomes.append((status, None, message or f"did not finish within {member.timeout_ms} ms{OVERRUN}", 0))
                if args.chain:
                    break
                continue
            message = f"did not finish within {member.timeout_ms} ms{OVERRUN}" if outcome.status == "timeout" else outcome.message
            outcomes.append((outcome.status, outcome.v, message, outcome.us))
        if missing and failure is not None:
            # The events after it were not reached.
            found.extend([] for _ in parts[len(found):])
            break
        offset += len(members)
    return found
