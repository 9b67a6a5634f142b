"""bench/scale_sim.py against cases whose answer is known on paper."""

from __future__ import annotations

import pytest

from bench.scale_sim import Deployment, TurnProfile, hops, simulate

# One call to the store a turn: a scheduler burst, the store's, a scheduler burst.
ONE_CALL = TurnProfile("one call", cpu_ms={"scheduler": 4.0, "store": 6.0}, rpcs={"store": 1.0})
ALL_ONE = {"scheduler": 1, "store": 1, "hooks": 1, "gateway": 1, "registry": 1}


def test_a_turn_is_its_calls_with_the_schedulers_cpu_around_each() -> None:
    assert hops(ONE_CALL) == [("scheduler", 2.0, 0.0), ("store", 6.0, 0.0), ("scheduler", 2.0, 0.0)]
    spread = hops(TurnProfile("two peers", cpu_ms={"store": 4.0, "hooks": 2.0}, rpcs={"store": 2.0, "hooks": 1.0}))
    assert [service for service, _, _ in spread] == ["scheduler", "store", "scheduler", "hooks", "scheduler", "store", "scheduler"]
    assert sum(ms for service, ms, _ in spread if service == "store") == pytest.approx(4.0)


def test_one_session_plays_at_the_sum_of_its_cpu() -> None:
    result = simulate(ONE_CALL, Deployment(shared_cores=2), 1, seconds=10, warmup_s=0.5)
    assert result.p(0.5) == pytest.approx(10.0)
    assert result.turns_per_s == pytest.approx(100.0, rel=0.01)


def test_many_sessions_saturate_the_busiest_process() -> None:
    """Four cores, so no core is short: the scheduler process (4 ms a turn) and the store (6 ms) each serve one
    burst at a time; with 16 sessions the store is the bottleneck: 1000 / 6 turns/s, each turn waiting its turn."""
    result = simulate(ONE_CALL, Deployment(shared_cores=4, replicas=ALL_ONE), 16, seconds=20, warmup_s=1)
    assert result.turns_per_s == pytest.approx(1000 / 6, rel=0.02)
    assert result.p(0.5) == pytest.approx(16 * 6.0, rel=0.1)  # Little's law: 16 turns in flight at 1000/6 a second
    two = simulate(ONE_CALL, Deployment(shared_cores=None, replicas={**ALL_ONE, "store": 2}), 16, seconds=20, warmup_s=1)
    assert two.turns_per_s == pytest.approx(1000 / 4, rel=0.02), "two stores: the scheduler (4 ms a turn) is next"


def test_a_session_with_too_many_open_jobs_waits_for_them() -> None:
    """Each turn queues a job as costly as the turn; one worker runs them; the turn waits for at most 1 open job."""
    profile = TurnProfile("jobs", cpu_ms={"scheduler": 4.0, "store": 6.0}, rpcs={"store": 1.0}, jobs=1,
                          job=TurnProfile("job", cpu_ms={"scheduler": 2.0, "store": 3.0}, rpcs={"store": 1.0}))
    result = simulate(profile, Deployment(shared_cores=None, detached_workers=1, max_jobs_per_session=1), 1, seconds=20, warmup_s=1)
    # A turn (5 ms) and its job (5 ms) one after the other, but for the lease polls between: fewer than 100 a second.
    assert 10 < result.turns_per_s < 100
