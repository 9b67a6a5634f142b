"""A submit that meets the session's running turn: the admit_message hookspec decides what becomes of it.

The lease tells: a submit whose session has a plugin implementing admit_message (GetSubscriptions'
admitting_plugin_ids, cached by the hook bus) first tries the lease without waiting; taken, its turn runs
as always (no extra round trip). Held, `SubmitAdmission.when_busy` asks the hooks service (AdmitMessage,
bounded by ADMIT_WAIT_S) with the running turn's id (this replica's runner, else the store's
GetRunningTurn) and then:

- queue (also: no decision, no plugin of the session implements it, the hooks service unreachable or
  slow): the submit waits for the lease, as every submit did;
- steer: the message's text joins the running turn as Interject's text does (here, or through the
  store's SignalTurn on the replica running it) and `Steered` is raised: the submit's stream follows
  that turn to its end, no turn of its own is made. A message without player text, or one the turn
  ended before it could join, queues;
- refuse: FAILED_PRECONDITION naming the plugin and its reason; nothing is committed.

A steered submit's idempotency key is remembered here (STEERED_KEPT per replica): a retry with the same key
follows the turn it joined again and does not interject twice (a retry reaching another replica is not
known there). A retry whose own turn is the running one (the store's busy answer names its key) is not
asked: it waits for that turn's result, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc

from covel.common.v1 import common_pb2
from covel.hooks.v1 import hooks_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.kinds import ActionSource
from services.scheduler.player_message import action_dict, render_player_message
from services.scheduler.recently_used import RecentlyUsed
from services.scheduler.turn.runner import TurnRunner
from shared.errors import failed_precondition
from shared.logs import get_logger

log = get_logger(component="admission")
# How long a submit waits for the hooks service's decision (each plugin has 1 s there: services/hooks/admission.py).
ADMIT_WAIT_S = 2.0
# Steered submits remembered by (session, idempotency key), for their retries.
STEERED_KEPT = 4096
# As Interject takes (services/scheduler/api/turn_signals.py MAX_INTERJECTION).
MAX_STEERING_TEXT = 4000


class Steered(Exception):
    """The submit's text joined the running turn `turn_id`, as `plugin_id` decided: its stream follows that turn
    (its turn_started says `steered_by`)."""

    # The turn metric's status of such a submit (covel_turn_duration_seconds).
    turn_status = "steered"

    def __init__(self, turn_id: str, plugin_id: str) -> None:
        super().__init__(f"steered into turn {turn_id} by {plugin_id}")
        self.turn_id = turn_id
        self.plugin_id = plugin_id


def steering_text(actions: list[common_pb2.PlayerAction]) -> str:
    """The player's text of a submit ("" when it has none: only a message with text can steer)."""
    said = [action for action in actions if action.text.strip() and action.source != ActionSource.SYSTEM]
    return render_player_message(said).strip() if said else ""


class SubmitAdmission:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, hooks: HookBus, runner: TurnRunner) -> None:
        self._store = store
        self._hooks = hooks
        self._runner = runner
        self._steered: RecentlyUsed[tuple[str, str], Steered] = RecentlyUsed(STEERED_KEPT)

    def steered_before(self, session_id: str, idempotency_key: str) -> Steered | None:
        """How an earlier submit with this key joined a turn here (None: none did)."""
        return self._steered.get((session_id, idempotency_key)) if idempotency_key else None

    async def asks(self) -> bool:
        """Whether any loaded plugin implements admit_message (else a submit takes the lease as it always did)."""
        try:
            return bool(await self._hooks.admitting_plugins())
        except grpc.aio.AioRpcError as error:
            log.warning("admission.subscriptions_failed", code=error.code().name)
            return False

    def when_busy(self, session_id: str, actions: list[common_pb2.PlayerAction],
                  idempotency_key: str) -> Callable[[str], Awaitable[None]]:
        """What the submit's lease try calls when a turn holds the lease (with the store's answer): returns to
        queue, raises to steer or refuse."""
        async def decide(busy: str) -> None:
            if idempotency_key and f"idempotency key {idempotency_key!r}" in busy:
                # The store says the running turn is this submit's own (services/store/leases.py _busy): a retry
                # waits for it and gets its result, as always; it neither steers into it nor is refused.
                return
            await self._decide(session_id, actions, idempotency_key)
        return decide

    async def _decide(self, session_id: str, actions: list[common_pb2.PlayerAction], idempotency_key: str) -> None:
        turn_id = self._runner.running_turn(session_id) or (
            await self._store.GetRunningTurn(store_pb2.GetRunningTurnRequest(session_id=session_id))).turn_id
        if not turn_id:
            return  # ended meanwhile: the submit takes the lease
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=session_id))).session
        if not set(session.active_plugins) & await self._hooks.admitting_plugins():
            return
        decision = await self._ask(session, turn_id, actions)
        if decision is None or decision.action == "queue":
            return
        if decision.action == "refuse":
            raise failed_precondition(f"refused by {decision.plugin_id}: {decision.reason}; wait for the running turn to end",
                                      reason="MESSAGE_REFUSED", subject=f"sessions/{session_id}")
        text = steering_text(actions)
        joined = await self._join(session_id, turn_id, text) if 0 < len(text) <= MAX_STEERING_TEXT else ""
        if not joined:
            log.info("admission.queued_instead", session_id=session_id, turn_id=turn_id, plugin_id=decision.plugin_id,
                     why="no player text to steer with" if not text else "the turn ended before the text joined it")
            return
        steered = Steered(joined, decision.plugin_id)
        if idempotency_key:
            self._steered.put((session_id, idempotency_key), steered)
        raise steered

    async def _ask(self, session: store_pb2.Session, turn_id: str,
                   actions: list[common_pb2.PlayerAction]) -> hooks_pb2.AdmitMessageResponse | None:
        """The hooks service's decision; None when it cannot give one in time (the submit queues)."""
        message = {"content": render_player_message(actions), "session_id": session.id, "channel": "grpc",
                   "actions": [action_dict(action) for action in actions]}
        pending = self._runner.pending_interjections(session.id)
        scope = ExecutionScope(session=session, turn_id=turn_id, logical_turn=0)
        try:
            return await self._hooks.admit_message(scope.context(), message, turn_id, pending=pending, timeout_s=ADMIT_WAIT_S)
        except grpc.aio.AioRpcError as error:
            log.warning("admission.unanswered", session_id=session.id, turn_id=turn_id, code=error.code().name,
                        error=error.details())
            return None

    async def _join(self, session_id: str, turn_id: str, text: str) -> str:
        """The text interjected into the running turn (here, or on its replica); the turn's id, "" when it ended."""
        if self._runner.running_turn(session_id) == turn_id:
            return self._runner.interject(session_id, text)
        try:
            signalled = await self._store.SignalTurn(
                store_pb2.SignalTurnRequest(session_id=session_id, turn_id=turn_id, kind="interject", text=text))
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return ""
            raise
        return signalled.signal.turn_id
