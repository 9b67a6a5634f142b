"""How much of the log a turn asks for with its lease (turn/history_window.py), and what the
sessions this replica ran are remembered as (known_sessions.py)."""

from __future__ import annotations

from covel.store.v1 import store_pb2
from services.scheduler.known_sessions import KnownSessions
from services.scheduler.turn.history_window import SINCE_SUMMARY, LastWindows, covers, player_turns_needed
from tests.scheduler.compiled import compiled_manifest, compiled_package


def agents(*windows: dict | None) -> dict:
    """One agent runtime per window (its agent.history; None: none declared)."""
    compiled = [compiled_manifest({"agent": {"history": window}} if window is not None else {}, runtime_id=f"p/a{index}")
                for index, window in enumerate(windows)]
    return {f"p/a{index}": manifest for index, manifest in enumerate(compiled)}


def test_the_most_player_turns_any_agent_reads() -> None:
    assert player_turns_needed({}, agents({"maxTurns": 3}), 20, compacts=True) == 3
    assert player_turns_needed({}, agents({"maxTurns": 3}, {"maxTurns": 40}), 20, compacts=True) == 40
    # No window declared: the scheduler's setting.
    assert player_turns_needed({}, agents(None), 20, compacts=True) == 20


def test_at_least_the_latest_player_turn() -> None:
    assert player_turns_needed({}, agents({"maxTurns": 0}), 20, compacts=True) == 1
    assert player_turns_needed({}, {}, 20, compacts=True) == 1


def test_a_compaction_provider_reads_everything_since_the_summary() -> None:
    provider = compiled_package("compactor", package={"contributes": {"extensions": ["history.compact@2/summaries"]}})
    assert player_turns_needed({"compactor": provider}, agents(None), 20, compacts=True) == SINCE_SUMMARY
    # RunManual and detached jobs do not compact: their agents' window is enough.
    assert player_turns_needed({"compactor": provider}, agents(None), 20, compacts=False) == 20


def test_covers() -> None:
    assert covers(SINCE_SUMMARY, 20) and covers(SINCE_SUMMARY, SINCE_SUMMARY)
    assert covers(20, 20) and covers(20, 3)
    assert not covers(3, 20) and not covers(20, SINCE_SUMMARY)


def test_last_windows_default_to_everything_and_forget_the_oldest() -> None:
    windows = LastWindows(capacity=2)
    assert windows.get("a") == SINCE_SUMMARY
    windows.note("a", 5)
    windows.note("b", 6)
    windows.note("a", 7)
    windows.note("c", 8)
    assert (windows.get("a"), windows.get("b"), windows.get("c")) == (7, SINCE_SUMMARY, 8)


def test_known_sessions_keep_the_newest() -> None:
    known = KnownSessions(capacity=2)
    for name in ("a", "b", "c"):
        known.note(store_pb2.Session(id=name, active_plugins=[name]))
    assert known.get("a") is None and list(known.get("c").active_plugins) == ["c"]  # type: ignore[union-attr]
    known.pop("c")
    assert known.get("c") is None
