"""Trigger rules over a run of turns."""

from dataclasses import dataclass, field

from services.scheduler.turn.selection import TriggerHistory, scheduled_this_turn
from tests.scheduler.compiled import compiled_manifest


@dataclass
class Result:
    runtime_id: str
    status: str


@dataclass
class Turn:
    logical_turn: int
    status: int
    runtime_results: list = field(default_factory=list)
    off_line: bool = False


MANIFEST = compiled_manifest({"schedule": {"stage": "post-turn", "every": 2,
                                            "trigger": {"startTurn": 3, "maxTriggerCount": 2, "cooldownTurns": 1}}}, runtime_id="p/r")


def play(turns: int, rolled_back: set[int] = frozenset()) -> list[int]:
    history_turns, ran = [], []
    for logical in range(1, turns + 1):
        history = TriggerHistory.from_turns(history_turns)
        runs = scheduled_this_turn(MANIFEST, "post-turn", logical, history)
        status = 3 if logical in rolled_back else 1
        if runs:
            ran.append(logical)
        history_turns.append(Turn(logical, status, [Result("p/r", "success")] if runs else []))
    return ran


def test_every_2_start_3_max_2_cooldown_1_over_8_turns() -> None:
    assert play(8) == [4, 6]


def test_a_rolled_back_turn_does_not_count() -> None:
    assert play(8, rolled_back={4}) == [4, 6, 8]


def test_cooldown_spaces_runs() -> None:
    manifest = compiled_manifest({"schedule": {"stage": "pre-turn", "trigger": {"cooldownTurns": 2}}}, runtime_id="p/c")
    turns, ran = [], []
    for logical in range(1, 8):
        runs = scheduled_this_turn(manifest, "pre-turn", logical, TriggerHistory.from_turns(turns))
        ran += [logical] if runs else []
        turns.append(Turn(logical, 1, [Result("p/c", "success")] if runs else []))
    assert ran == [1, 4, 7]


def test_manual_event_and_subagent_only_are_never_scheduled() -> None:
    for schedule in ({"trigger": {"type": "manual"}}, {"trigger": {"type": "event", "event": "x.happened"}}, {"subagentOnly": True}):
        assert not scheduled_this_turn(compiled_manifest({"schedule": schedule}, runtime_id="x/x"), "narrative", 1)


def test_setup_progress_per_version_with_a_retry_budget() -> None:
    from services.scheduler.turn.selection import setup_due, setup_progress

    progress = None
    for _ in range(2):
        progress = setup_progress(progress, "1.0.0", "failed", "boom", completed=False)
        assert progress["state"] == "pending" and setup_due(progress, "1.0.0")
    progress = setup_progress(progress, "1.0.0", "failed", "boom", completed=False)
    assert progress["state"] == "blocked" and progress["attempts"] == 3 and not setup_due(progress, "1.0.0")
    assert setup_due(progress, "1.1.0"), "a new version runs it again"
    assert setup_progress(progress, "1.1.0", "failed", "boom", completed=False)["attempts"] == 1, "with a fresh budget"
    done = setup_progress(None, "1.1.0", "success", "", completed=True)
    assert done == {"state": "done", "resolution": "completed", "version": "1.1.0"} and not setup_due(done, "1.1.0")
    assert setup_progress(done, "1.1.0", "skipped", "PreRuntime said no", completed=False) is None, "a gated run records nothing"


def test_trigger_histories_follow_the_session_recorded_turn_count_and_head() -> None:
    from covel.store.v1 import store_pb2
    from services.scheduler.turn.selection import TriggerHistories

    committed = store_pb2.TURN_STATUS_COMMITTED
    histories = TriggerHistories(capacity=2)
    session = store_pb2.Session(id="s", recorded_turns=3)
    assert histories.get(session) is None
    built = TriggerHistory.from_turns([Turn(1, committed, [Result("p/r", "success")])])
    histories.remember(session, built)
    assert histories.get(session) is built
    # A turn recorded here: the next lease's count is one more, its head that turn, and the history counts the turn.
    histories.recorded(session, store_pb2.Turn(id="t2", logical_turn=2, status=committed,
                                               runtime_results=[store_pb2.RuntimeResult(runtime_id="p/r", status="success")]))
    assert histories.get(store_pb2.Session(id="s", recorded_turns=3)) is None
    following = histories.get(store_pb2.Session(id="s", recorded_turns=4, head_turn_id="t2"))
    assert following is not None and following.counts == {"p/r": 2} and following.last_turn == {"p/r": 2}
    # A failed turn counts as recorded but not as a run; the head stays.
    histories.recorded(store_pb2.Session(id="s", recorded_turns=4, head_turn_id="t2"), store_pb2.Turn(logical_turn=3, status=store_pb2.TURN_STATUS_FAILED))
    assert histories.get(store_pb2.Session(id="s", recorded_turns=5, head_turn_id="t2")).counts == {"p/r": 2}  # type: ignore[union-attr]
    # Turns recorded elsewhere (another replica): the counts differ, the history is read again.
    assert histories.get(store_pb2.Session(id="s", recorded_turns=7, head_turn_id="t2")) is None
    # A turn off the story's line (rewound past, a version not chosen) counts no run.
    rewound = TriggerHistory.from_turns([Turn(1, committed, [Result("p/r", "success")], off_line=True)])
    assert rewound.counts == {}
    # A move of the story's line (a rewind): the same count, another head: read again.
    assert histories.get(store_pb2.Session(id="s", recorded_turns=5, head_turn_id="t1")) is None
