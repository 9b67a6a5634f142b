"""bench/scale_sim.py against cases whose answer is known on paper."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.scale_jobs import job_plan
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


def test_a_stream_message_costs_its_weight_of_a_call() -> None:
    """Two calls and five messages to the hooks service: 2 + 5 x 0.4 = 4 units of its 8 ms, 2 ms a call, 0.8 a message."""
    profile = TurnProfile("streams", cpu_ms={"hooks": 8.0}, rpcs={"hooks": 2.0}, messages={"hooks": 5.0}, message_weight=0.4)
    bursts = [b for b in hops(profile) if b.service == "hooks"]
    assert sorted(round(b.ms, 6) for b in bursts) == [0.8] * 5 + [2.0] * 2
    assert sum(b.ms for b in bursts) == pytest.approx(8.0)


def test_the_lease_is_taken_by_the_first_store_call_and_let_go_by_the_last() -> None:
    profile = TurnProfile("calls", cpu_ms={"store": 3.0, "hooks": 2.0}, rpcs={"store": 3.0, "hooks": 4.0})
    services = [b.service for b in hops(profile)]
    peers = [s for s in services if s != "scheduler"]
    assert peers[0] == "store" and peers[-1] == "store" and peers.count("store") == 3


# A job that runs 100 ms on the gateway (its model calls' CPU, say) and commits with its last store calls.
SLOW_JOB = TurnProfile("slow job", cpu_ms={"gateway": 100.0, "store": 0.3}, rpcs={"store": 3.0, "gateway": 1.0})


def test_a_player_does_not_wait_for_a_job_that_runs_off_the_lease() -> None:
    """A turn of 10 ms queues a job of 100 ms; with the job on the lease the next turn would wait for it. Off the lease
    only the job's commit (0.1 ms a store call) takes it, so the player's turns stay about 10 ms; with a second
    between turns the job finds the session free at its commit."""
    profile = TurnProfile("turn", cpu_ms={"scheduler": 4.0, "store": 6.0}, rpcs={"store": 1.0}, jobs=1, job=SLOW_JOB)
    result = simulate(profile, Deployment(shared_cores=None), 1, think_s=1.0, seconds=20, warmup_s=1)
    assert result.p(0.95) == pytest.approx(10.0, abs=0.5)
    assert result.jobs_done >= result.turns - 2 and result.job_reruns == 0


def test_a_job_whose_session_is_never_free_runs_again_after_the_lease_wait() -> None:
    """Back to back, the player lets the session go for no time between turns (no client, no scheduler burst
    after the commit, a lease taken in no time): the job's commit polls every 250 ms for 10 s, then the worker runs
    it again."""
    profile = TurnProfile("turn", cpu_ms={"gateway": 6.0}, rpcs={"store": 2.0, "gateway": 1.0}, jobs=1, job=SLOW_JOB)
    unbounded = Deployment(shared_cores=None, detached_workers=1, max_jobs_per_session=100_000)
    result = simulate(profile, unbounded, 1, seconds=25, warmup_s=1)
    assert result.job_reruns >= 2
    assert result.jobs_done == 0


def test_a_session_at_its_job_bound_plays_at_its_jobs_pace() -> None:
    """The same with the store's bound of 16 open jobs: once 16 are open the player's turn waits (without marking
    the session, the lease being free), so a job commits, its end wakes the player: a turn per job."""
    profile = TurnProfile("turn", cpu_ms={"gateway": 6.0}, rpcs={"store": 2.0, "gateway": 1.0}, jobs=1, job=SLOW_JOB)
    result = simulate(profile, Deployment(shared_cores=None, detached_workers=1), 1, seconds=25, warmup_s=1)
    assert result.jobs_open_at_end == 16
    assert result.job_reruns == 0
    assert result.p(0.5) > 100.0, "each turn waits for a job of 100 ms to end"
    assert result.turns == pytest.approx(result.jobs_done - result.jobs_open_at_end, abs=20)


def test_a_crowded_process_spends_more_a_call() -> None:
    """The crowd cost: each burst pays crowd_ms for each other burst waiting at its process."""
    base = TurnProfile("crowd", cpu_ms={"scheduler": 1.0, "store": 6.0}, rpcs={"store": 1.0})
    alone = simulate(base, Deployment(shared_cores=None), 16, seconds=10, warmup_s=1)
    crowded = simulate(TurnProfile("crowd", cpu_ms=base.cpu_ms, rpcs=base.rpcs, crowd_ms=0.2), Deployment(shared_cores=None), 16,
                       seconds=10, warmup_s=1)
    assert alone.cpu_ms_per_turn == pytest.approx(7.0, rel=0.02)
    assert crowded.cpu_ms_per_turn > alone.cpu_ms_per_turn + 1.0
    assert crowded.turns_per_s < alone.turns_per_s


def test_a_jobs_commit_asks_for_the_lease_itself_or_with_its_own_call() -> None:
    """Five store calls: the claim, the snapshot, a read, then the commit. In one call (job_commits.py) the commit asks
    for the lease; on the tree before, AcquireTurnLease asked, CommitTurn committed and CompleteDetachedJob ended it."""
    job = TurnProfile("job", cpu_ms={"store": 5.0}, rpcs={"store": 5.0})
    bursts, claim, take, commit = job_plan(job, 0.0)
    stores = [index for index, b in enumerate(bursts) if b.service == "store"]
    assert (claim, take, commit) == (stores[0], stores[-1], stores[-1])
    bursts, claim, take, commit = job_plan(replace(job, commit_calls=3), 0.0)
    assert (claim, take, commit) == (stores[0], stores[-3], stores[-2])
