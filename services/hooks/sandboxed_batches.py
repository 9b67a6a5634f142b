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

from services.hooks.common.worker_messages import HookOutcome, HooksArgs, HooksReply
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
    """One plugin generation's batches (the `batch` of its SandboxedHook stand-ins); `round_trips` counts them."""

    def __init__(self, plugin_id: str, workers: PluginWorkers, generation: int) -> None:
        self.plugin_id = plugin_id
        self.workers = workers
        self.generation = generation
        self.round_trips = 0

    def _args(self, members: Sequence[HookRegistration], view: ExecutionView, payload: dict[str, Any],
              event: HookEvent) -> HooksArgs:
        return HooksArgs(items=[member.handler.index for member in members],  # type: ignore[attr-defined]
                         timeouts_ms=[member.timeout_ms for member in members], view=view_of(view), payload=payload,
                         chain=event.mode is not Mode.PARALLEL, guard=event.guard, replace_fields=list(event.replace_fields),
                         gen=self.generation, settings=dict(view.plugin_settings.get(self.plugin_id, {})))

    async def run(self, members: Sequence[HookRegistration], view: ExecutionView, payload: dict[str, Any],
                  event: HookEvent) -> list[Outcome]:
        args = self._args(members, view, payload, event)
        received: dict[int, HookOutcome] = {}
        grace_s = self.workers.pool.settings.sandbox_stop_grace_ms / 1000
        timeouts_s = [timeout / 1000 for timeout in args.timeouts_ms]
        timer: asyncio.Timeout | None = None

        def note(op: str, values: list[Any]) -> None:
            if op != "hooks.outcome" or len(values) != 2 or type(values[0]) is not int or not 0 <= values[0] < len(members):
                raise ProtocolError(f"a batch's note is ({op!r}, position, outcome) for one of {len(members)} handlers")
            try:
                received[values[0]] = msgspec.convert(values[1], HookOutcome)
            except msgspec.ValidationError as error:
                raise ProtocolError(f"a handler's outcome is not the protocol's: {error}") from error
            if args.chain and timer is not None and values[0] + 1 < len(members):
                # The next handler of the chain starts now: the host's bound is its own time (and the grace).
                timer.reschedule(asyncio.get_running_loop().time() + timeouts_s[values[0] + 1] + grace_s)

        backend = STATE_BACKEND.get()
        capabilities = state_capability(backend, view.session_id, self.plugin_id) if isinstance(backend, StoreState) else None
        failure: tuple[str, str] | None = None
        self.round_trips += 1
        worker = None
        try:
            worker = await self.workers.worker()
            # The first handler's time (a parallel batch: the longest); each outcome of a chain moves it (note).
            async with asyncio.timeout((timeouts_s[0] if args.chain else max(timeouts_s)) + grace_s) as timer:
                # The call's deadline lies past every bound of the timer: the caller's cancellation is no fault.
                reply = await worker.call("hooks", args, reply=HooksReply, notes=note, capabilities=capabilities,
                                          deadline=time.monotonic() + sum(timeouts_s) + grace_s * (len(members) + 1))
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
        return self._outcomes(members, args, received, failure)

    @staticmethod
    def _outcomes(members: Sequence[HookRegistration], args: HooksArgs, received: dict[int, HookOutcome],
                  failure: tuple[str, str] | None) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for position, member in enumerate(members):
            outcome = received.get(position)
            if outcome is None:
                if failure is None:
                    break  # the chain ended before it (an abort, a guard's failure): the dispatcher stops there too
                status, message = failure
                outcomes.append((status, None, message or f"did not finish within {member.timeout_ms} ms{OVERRUN}", 0))
                if args.chain:
                    break  # the ones after it were not reached: they run alone
                continue
            message = f"did not finish within {member.timeout_ms} ms{OVERRUN}" if outcome.status == "timeout" else outcome.message
            outcomes.append((outcome.status, outcome.v, message, outcome.us))
        return outcomes
