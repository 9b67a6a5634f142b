"""A submit meeting a running turn (services/scheduler/api/admission.py, turn/lease.py): the lease tried without
waiting only when a plugin implements admit_message; AdmitMessage asked only when one of the session's
plugins does; queue, steer (here or on another replica, once per idempotency key) and refuse; a hooks
service that does not answer queues."""

from __future__ import annotations

import grpc
import pytest

from covel.common.v1 import common_pb2
from covel.hooks.v1 import hooks_pb2
from covel.store.v1 import store_pb2
from services.scheduler.api.admission import Steered, SubmitAdmission, steering_text
from services.scheduler.settings import SchedulerSettings
from services.scheduler.turn.lease import LeaseKeeper
from shared.errors import ServiceError

pytestmark = pytest.mark.asyncio(loop_scope="session")


def rpc_error(code: grpc.StatusCode, details: str = "") -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class Store:
    def __init__(self, running: str = "t-1", active: tuple[str, ...] = ("gate",), signal_fails: bool = False) -> None:
        self.running, self.active, self.signal_fails = running, active, signal_fails
        self.signals: list[store_pb2.SignalTurnRequest] = []
        self.leases: list[store_pb2.AcquireTurnLeaseRequest] = []
        self.busy = False

    async def GetRunningTurn(self, request, **_):
        return store_pb2.GetRunningTurnResponse(turn_id=self.running)

    async def GetSession(self, request, **_):
        return store_pb2.GetSessionResponse(session=store_pb2.Session(id=request.session_id, active_plugins=list(self.active)))

    async def SignalTurn(self, request, **_):
        self.signals.append(request)
        if self.signal_fails:
            raise rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "no turn of session s is running")
        return store_pb2.SignalTurnResponse(signal=store_pb2.TurnSignal(turn_id=request.turn_id))

    async def AcquireTurnLease(self, request, **_):
        self.leases.append(request)
        if self.busy and request.wait_ms == 0:
            raise rpc_error(grpc.StatusCode.ABORTED, "session s has a turn running")
        return store_pb2.AcquireTurnLeaseResponse(lease=store_pb2.TurnLease(lease_id="l"))


class Hooks:
    def __init__(self, admitting=frozenset({"gate"}), action: str = "queue", reason: str = "", fails: bool = False) -> None:
        self.admitting, self.action, self.reason, self.fails = admitting, action, reason, fails
        self.asked: list[tuple] = []

    async def admitting_plugins(self):
        return self.admitting

    async def admit_message(self, context, message, turn_id, *, step=0, pending=0, timeout_s):
        self.asked.append((context.session_id, list(context.active_plugin_ids), message, turn_id, pending, timeout_s))
        if self.fails:
            raise rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "too slow")
        return hooks_pb2.AdmitMessageResponse(action=self.action, reason=self.reason, plugin_id="gate" if self.action != "queue" else "")


class Runner:
    def __init__(self, running: str = "") -> None:
        self.running = running
        self.interjected: list[tuple[str, str]] = []

    def running_turn(self, session_id: str) -> str:
        return self.running

    def interject(self, session_id: str, text: str) -> str:
        self.interjected.append((session_id, text))
        return self.running

    def pending_interjections(self, session_id: str) -> int:
        return len(self.interjected)


SAY = [common_pb2.PlayerAction(seat_id="main", kind="say", text="Over here!", source="player")]


async def decide(store: Store, hooks: Hooks, runner: Runner, actions=SAY, key: str = "k-1") -> SubmitAdmission:
    admission = SubmitAdmission(store, hooks, runner)  # type: ignore[arg-type]
    await admission.when_busy("s", actions, key)("session s has a turn running: turn t-1, lease until …")
    return admission


async def test_no_plugin_of_the_session_implements_it_no_admit_message_call() -> None:
    hooks = Hooks(admitting=frozenset({"other"}))
    await decide(Store(), hooks, Runner())
    assert hooks.asked == []


async def test_the_running_turn_ended_meanwhile_nothing_is_asked() -> None:
    hooks = Hooks(action="refuse", reason="no")
    await decide(Store(running=""), hooks, Runner())
    assert hooks.asked == []


async def test_queue_returns_and_the_hooks_service_is_asked_with_the_message_and_the_turn() -> None:
    hooks = Hooks()
    await decide(Store(), hooks, Runner())
    [(session_id, active, message, turn_id, pending, timeout_s)] = hooks.asked
    assert (session_id, active, turn_id, pending, timeout_s) == ("s", ["gate"], "t-1", 0, 2.0)
    assert message["content"] == "Over here!" and message["channel"] == "grpc" and message["actions"][0]["kind"] == "say"


async def test_refuse_fails_the_submit_naming_the_plugin_and_its_reason() -> None:
    with pytest.raises(ServiceError) as refused:
        await decide(Store(), Hooks(action="refuse", reason="the scene is being written"), Runner())
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert str(refused.value) == "refused by gate: the scene is being written; wait for the running turn to end"


async def test_steer_into_a_turn_running_here_interjects_once_per_key() -> None:
    runner = Runner(running="t-here")
    admission = SubmitAdmission(Store(running="t-other"), Hooks(action="steer"), runner)  # type: ignore[arg-type]
    with pytest.raises(Steered) as steered:
        await admission.when_busy("s", SAY, "k-1")("session s has a turn running")
    assert (steered.value.turn_id, steered.value.plugin_id) == ("t-here", "gate") and runner.interjected == [("s", "Over here!")]
    assert admission.steered_before("s", "k-1") is steered.value
    assert admission.steered_before("s", "k-2") is None and admission.steered_before("s", "") is None


async def test_steer_into_another_replicas_turn_signals_it_through_the_store() -> None:
    store = Store(running="t-there")
    with pytest.raises(Steered) as steered:
        await decide(store, Hooks(action="steer"), Runner())
    assert steered.value.turn_id == "t-there"
    [signal] = store.signals
    assert (signal.turn_id, signal.kind, signal.text) == ("t-there", "interject", "Over here!")


async def test_steer_queues_when_the_turn_ended_or_the_message_has_no_text() -> None:
    store = Store(running="t-there", signal_fails=True)
    await decide(store, Hooks(action="steer"), Runner())
    assert len(store.signals) == 1
    advance = [common_pb2.PlayerAction(seat_id="main", kind="advance", source="player")]
    runner = Runner(running="t-here")
    await decide(Store(), Hooks(action="steer"), runner, actions=advance)
    assert runner.interjected == [] and steering_text(advance) == ""


async def test_a_hooks_service_that_does_not_answer_queues() -> None:
    hooks = Hooks(fails=True)
    await decide(Store(), hooks, Runner())
    assert len(hooks.asked) == 1


async def test_the_lease_is_tried_without_waiting_only_with_an_admission() -> None:
    settings = SchedulerSettings()
    store = Store()
    keeper = LeaseKeeper(store, settings)  # type: ignore[arg-type]
    called = []

    async def when_busy(busy: str) -> None:
        called.append(busy)

    # No admission: one try, waiting as always.
    await keeper.acquire("s", "", "player")
    # Uncontended with an admission: the first try takes it, nothing else is asked.
    await keeper.acquire("s", "", "player", when_busy=when_busy)
    assert [request.wait_ms for request in store.leases] == [settings.scheduler_lease_wait_ms, 0] and called == []
    # Contended: the admission, then the wait.
    store.busy = True
    store.leases.clear()
    await keeper.acquire("s", "", "player", when_busy=when_busy)
    assert [request.wait_ms for request in store.leases] == [0, settings.scheduler_lease_wait_ms]
    assert called == ["session s has a turn running"]


async def test_a_retry_of_the_running_turns_own_submit_waits_for_it_unasked() -> None:
    hooks = Hooks(action="refuse", reason="no")
    admission = SubmitAdmission(Store(), hooks, Runner())  # type: ignore[arg-type]
    await admission.when_busy("s", SAY, "k-1")("a turn with idempotency key 'k-1' is still running in session s: turn t-1, …")
    assert hooks.asked == []


@pytest.mark.parametrize(("raised", "status"), [(Steered("t-running", "admission-probe"), "steered"), (RuntimeError("lost"), "error")])
async def test_the_turn_metric_counts_a_steered_submit_as_steered_not_as_an_error(monkeypatch, raised, status) -> None:
    from types import SimpleNamespace

    from services.scheduler.turn import runner
    from services.scheduler.turn.runner import TurnRunner

    recorded = []
    monkeypatch.setattr(runner.metrics, "record_turn", lambda origin, status, seconds: recorded.append((origin, status)))

    async def run(request, emit):
        raise raised

    request = SimpleNamespace(session_id="s", origin="player")
    with pytest.raises(type(raised)):
        await TurnRunner.run_observed(SimpleNamespace(run=run), request, emit=None)
    assert recorded == [("player", status)]
