"""The fault breaker: faults count, vetoes do not, the tripping execution keeps its set."""

from services.hooks.fault_breaker import FaultBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_threshold_within_window_pauses_from_the_next_execution() -> None:
    clock = Clock()
    breaker = FaultBreaker(threshold=3, window_s=60, clock=clock)
    for turn in ("t1", "t2"):
        breaker.record("s", turn, "flaky", "error", "boom")
    assert breaker.excluded("s", "t3", ["flaky"]) == set()
    breaker.record("s", "t3", "flaky", "timeout", "did not finish within 5000 ms")
    assert breaker.excluded("s", "t3", ["flaky"]) == set(), "the tripping execution keeps its frozen set"
    assert breaker.excluded("s", "t4", ["flaky", "other"]) == {"flaky"}
    assert breaker.excluded("other-session", "t4", ["flaky"]) == set()
    [pause] = breaker.paused("s")
    assert pause.faults == 3 and "timeout" in pause.reason


def test_aborts_do_not_count_and_old_faults_expire() -> None:
    clock = Clock()
    breaker = FaultBreaker(threshold=2, window_s=60, clock=clock)
    breaker.record("s", "t1", "p", "abort", "vetoed")
    breaker.record("s", "t1", "p", "ok", "")
    breaker.record("s", "t1", "p", "error", "boom")
    clock.now += 61
    breaker.record("s", "t2", "p", "invalid-result", "garbage")
    assert breaker.paused("s") == []


def test_reset_lets_the_plugin_run_again() -> None:
    breaker = FaultBreaker(threshold=1, window_s=60)
    breaker.record("s", "t1", "p", "error", "boom")
    assert breaker.excluded("s", "t2", ["p"]) == {"p"}
    assert breaker.reset("s", "p") is True
    assert breaker.excluded("s", "t2", ["p"]) == set()
    assert breaker.reset("s", "p") is False
