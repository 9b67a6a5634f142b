"""The session's turn lease in the model (bench/scale_sim.py), as the store hands it out.

services/store/leases.py and lease_wakeups.py: one holder at a time. A player's turn asks with its first store
call; while the lease is held, or the session has `max_jobs_per_session` detached jobs queued or running, the store
asks again (a database write, each a store burst here) after 20 ms, doubling to 250 ms, or at once when a job's
commit lets the session go or one of its jobs ends; each ask while the lease is held marks the session for 2 s,
and a marked session's jobs are neither claimed nor given the lease. After the scheduler's 10 s wait the store
answers ABORTED (or RESOURCE_EXHAUSTED, queue full) and the client submits again after RetryInfo's 0.5 s (2 s).
A job's commit (one call that takes the lease in its transaction: job_commits.py) tries every 250 ms, woken by
another job's release but not by a player's commit (the player may act at once and goes first); after 10 s the
worker runs the job again from its start (worker.py, SESSION_BUSY).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import simpy

from bench.scale_profile import Burst

if TYPE_CHECKING:
    from bench.scale_sim import Cluster

Process = Generator[simpy.Event, object, None]
POLL_FIRST_S, POLL_MAX_S, PLAYER_WAIT_MARK_S = 0.02, 0.25, 2.0
LEASE_WAIT_S, BUSY_RETRY_S, QUEUE_FULL_RETRY_S = 10.0, 0.5, 2.0
# Less than this left of a wait is none (a timeout of less would not move simpy's float clock).
EPSILON_S = 1e-6


@dataclass
class SessionLease:
    holder: str = ""  # "", "player" or "job"
    player_waiting_until: float = -1.0
    open_jobs: int = 0  # queued or running
    # Set when the session may be free for a waiting player (a job's release or end), or for a waiting job.
    player_wake: simpy.Event | None = None
    job_wake: simpy.Event | None = None


class Leases:
    def __init__(self, cluster: Cluster, max_jobs_per_session: int, poll_ms: float) -> None:
        self.cluster, self.max_jobs, self.poll_ms = cluster, max_jobs_per_session, poll_ms
        self.sessions: dict[int, SessionLease] = {}

    def state(self, session: int) -> SessionLease:
        found = self.sessions.get(session)
        if found is None:
            found = self.sessions[session] = SessionLease()
        return found

    def marked(self, session: int) -> bool:
        """A player's turn waits for the session: its jobs wait behind it."""
        return self.state(session).player_waiting_until > self.cluster.env.now

    def _ask(self, session: int, first: Burst, asks: int) -> Process:
        yield from self.cluster.call(first if asks == 0 else first._replace(ms=self.poll_ms, sandbox_ms=0.0), session)

    def _sleep(self, pause: float, wake: simpy.Event) -> Generator[simpy.Event, object, bool]:
        """Until the wakeup or `pause`; whether it was woken."""
        yield self.cluster.env.timeout(pause) | wake
        return wake.triggered

    def for_player(self, session: int, first: Burst) -> Process:
        env, state = self.cluster.env, self.state(session)
        asks, pause, give_up = 0, POLL_FIRST_S, env.now + LEASE_WAIT_S
        while True:
            yield from self._ask(session, first, asks)
            asks += 1
            full = state.open_jobs >= self.max_jobs
            if not state.holder and not full:
                state.holder, state.player_waiting_until = "player", -1.0
                return
            if state.holder:
                state.player_waiting_until = env.now + PLAYER_WAIT_MARK_S
            if give_up - env.now < EPSILON_S:
                # The client waits as RetryInfo says and submits again.
                yield env.timeout(QUEUE_FULL_RETRY_S if full else BUSY_RETRY_S)
                asks, pause, give_up = 0, POLL_FIRST_S, env.now + LEASE_WAIT_S
                continue
            state.player_wake = state.player_wake or env.event()
            if not (yield from self._sleep(min(pause, give_up - env.now), state.player_wake)):
                pause = min(2 * pause, POLL_MAX_S)

    def for_job(self, session: int, first: Burst | None) -> Generator[simpy.Event, object, bool]:
        """The lease for a job's commit, asked with `first` (its own call) or a lease check, then a lease check each
        try; False once the wait ran out (the job runs again)."""
        env, state = self.cluster.env, self.state(session)
        give_up, asks = env.now + LEASE_WAIT_S, 0
        check = Burst("store", self.poll_ms, 0.0)
        while True:
            yield from self._ask(session, first or check, asks)
            asks += 1
            if not state.holder and not self.marked(session):
                state.holder = "job"
                return True
            if give_up - env.now < EPSILON_S:
                return False
            state.job_wake = state.job_wake or env.event()
            yield from self._sleep(min(POLL_MAX_S, give_up - env.now), state.job_wake)

    def release(self, session: int, *, by_job: bool) -> None:
        state = self.state(session)
        state.holder = ""
        if by_job:
            self._wake(state)

    def job_ended(self, session: int) -> None:
        state = self.state(session)
        state.open_jobs -= 1
        self._wake(state)

    @staticmethod
    def _wake(state: SessionLease) -> None:
        for name in ("player_wake", "job_wake"):
            event = getattr(state, name)
            if event is not None:
                setattr(state, name, None)
                event.succeed()
