"""A submit: the player's turn and its auto-advance chain, streamed; or, as the session's admit_message
hookspecs decide when it meets a running turn (admission.py), that turn followed to its end.

The steps: a retried submit that joined a turn follows it again; else its turn runs (steered into the
running turn, it is `Joined` to it; run, `Completed`) and a completed story that yields `continue` asks
for the next turn, up to the session's bound; a joined submit then follows the turn it joined."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from covel.common.v1 import common_pb2
from covel.scheduler.internal.v1 import turn_events_pb2
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.admission import Steered, SubmitAdmission
from services.scheduler.api.advance_chains import AdvanceChains
from services.scheduler.api.turn_follow import TurnFollower
from services.scheduler.api.turn_stream import TurnStreams, send_completed
from services.scheduler.hooks.event_keys import SchedulerEventKeys
from services.scheduler.turn.outcome import requests_advance
from services.scheduler.turn.request import AdvanceStop, TurnRequest
from services.scheduler.turn.settle_wait import wait_for_settling_jobs
from services.scheduler.turn.stream import Emit
from shared.logs import get_logger
from shared.structs import from_struct

log = get_logger(component="submit")

WhenBusy = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Completed:
    """The submit ran its own turn (and the auto-advance turns after it)."""

    turn: store_pb2.Turn


@dataclass(frozen=True)
class Joined:
    """The submit's text joined the running turn `turn_id`, as `plugin_id` decided: its stream follows that turn."""

    turn_id: str
    plugin_id: str


class Submissions:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, admission: SubmitAdmission, events: SchedulerEventKeys,
                 streams: TurnStreams, follower: TurnFollower, chains: AdvanceChains, max_auto_advance: int) -> None:
        self._store = store
        self._admission = admission
        self._events = events
        self._streams = streams
        self._follower = follower
        self._chains = chains
        # The bound of a session whose framework settings set no maxAutoAdvance.
        self._max_auto_advance = max_auto_advance

    async def submit(self, request: scheduler_pb2.SubmitActionsRequest,
                     actions: list[common_pb2.PlayerAction]) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        """The submit's turn and its auto-advance chain, streamed (or the turn it joined, followed)."""
        # A submit steered into the running turn follows that turn; a retry of one, again.
        before = self._admission.steered_before(request.session_id, request.idempotency_key)
        joined = _joined(before) if before is not None else None
        if joined is None:
            when_busy = await self._when_busy(request, actions)
            streamed = self._streams.start(partial(self._run_chain, request, actions, when_busy), session_id=request.session_id)
            async for event in streamed.events(batched=request.batch_events):
                yield event
            outcome = streamed.outcome()
            joined = outcome if isinstance(outcome, Joined) else None
        if joined is not None:
            async for event in self._follow_joined(request.session_id, joined):
                yield event

    async def _when_busy(self, request: scheduler_pb2.SubmitActionsRequest, actions: list[common_pb2.PlayerAction]) -> WhenBusy | None:
        """What the turn's lease try asks when a turn holds the lease. An interaction's answer (SubmitInteraction)
        is no message to admit: it waits for its own turn."""
        answers = any(action.HasField("interaction") for action in actions)
        if answers or not await self._admission.asks():
            return None
        return self._admission.when_busy(request.session_id, actions, request.idempotency_key)

    async def _run_chain(self, request: scheduler_pb2.SubmitActionsRequest, actions: list[common_pb2.PlayerAction],
                         when_busy: WhenBusy | None, emit: Emit) -> Completed | Joined:
        # Cancel stops this submit's turn and its auto-advance chain, at any point (stop is checked
        # when a turn takes its lease, and between turns).
        stop = self._chains.open(request.session_id)
        try:
            first = await self._first_turn(request, actions, when_busy, stop, emit)
            if isinstance(first, Completed):
                await send_completed(emit, first.turn)
                await self._auto_advance(request, first.turn, stop, emit)
            return first
        finally:
            self._chains.close(request.session_id, stop)

    async def _first_turn(self, request: scheduler_pb2.SubmitActionsRequest, actions: list[common_pb2.PlayerAction],
                          when_busy: WhenBusy | None, stop: AdvanceStop, emit: Emit) -> Completed | Joined:
        """The submit's own turn, or the running turn its text joined (the admission raises Steered for it)."""
        turn_request = TurnRequest.player(request.session_id, actions, request.idempotency_key, stop=stop, when_busy=when_busy)
        accepted = AnnouncedOnStart(emit, partial(self._events.player_message, request.session_id, actions, request.idempotency_key))
        gave_up = await wait_for_settling_jobs(self._store, request.session_id, stop.is_set)
        if gave_up:
            log.info("settle.wait_passed", session_id=request.session_id, job_ids=gave_up)
        try:
            return Completed(await self._streams.run(turn_request, accepted))
        except Steered as steered:
            return _joined(steered)

    async def _auto_advance(self, request: scheduler_pb2.SubmitActionsRequest, turn: store_pb2.Turn, stop: AdvanceStop,
                            emit: Emit) -> None:
        """A story that yields `continue` asks for the next turn, up to the session's bound."""
        advances = 0
        while (requests_advance(turn) and not stop.is_set()
               and advances < await self._session_max_auto_advance(request.session_id) and not stop.is_set()):
            advances += 1
            key = f"{request.idempotency_key}:advance:{advances}" if request.idempotency_key else ""
            advance = common_pb2.PlayerAction(seat_id="main", kind="advance", source="system")
            turn = await self._streams.run(TurnRequest.player(request.session_id, [advance], key, origin="continuation", stop=stop), emit)
            await send_completed(emit, turn)

    async def _session_max_auto_advance(self, session_id: str) -> int:
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=session_id))).session
        framework = from_struct(session.plugin_settings["framework"]) if "framework" in session.plugin_settings else {}
        value = framework.get("maxAutoAdvance", self._max_auto_advance)
        return value if isinstance(value, int) and value >= 0 else self._max_auto_advance

    async def _follow_joined(self, session_id: str, joined: Joined) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        async for event in self._follower.followed(session_id, joined.turn_id):
            if event.WhichOneof("event") == "turn_started":
                event.turn_started.steered_by = joined.plugin_id
            yield event


class AnnouncedOnStart:
    """The first turn's emit: message:received / message:preprocessed once the turn is accepted (it reports
    turn_started, its lease taken); not for a retried submit answered with the first turn, nor for one refused
    (busy session, ended session)."""

    def __init__(self, emit: Emit, announce: Callable[[], object]) -> None:
        self._emit = emit
        self._announce = announce
        self._announced = False

    async def __call__(self, event: turn_events_pb2.TurnEvent) -> None:
        if not self._announced and event.WhichOneof("event") == "turn_started":
            self._announced = True
            self._announce()
        await self._emit(event)


def _joined(steered: Steered) -> Joined:
    return Joined(steered.turn_id, steered.plugin_id)
