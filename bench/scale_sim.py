"""A discrete-event model of the five services under many sessions (simpy), fed by measured per-turn costs.

A turn is bursts of CPU (bench/scale_profile.py); `off_path` of each burst runs after its answer (the turn does not wait
for it). A service process runs one burst at a time (one Python process, one GIL): a burst waits for its process,
then for a core; a plugin sandbox's share waits for a core only (a process of its own). On one machine every
process (the client too) shares the cores; in a deployment each replica has a core of its own and each store
call also holds a database core. The model's lease rules are the store's, in scale_leases.py; its detached jobs
the workers', in scale_jobs.py.
"""

from __future__ import annotations

import statistics
import zlib
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field

import simpy

from bench.scale_jobs import JobQueue, worker
from bench.scale_leases import Leases
from bench.scale_profile import SERVICES, Burst, TurnProfile, hops, store_indices

# A simpy process: a generator of the events it waits for.
Process = Generator[simpy.Event, object, None]
START_SPREAD_S = 0.5


@dataclass(frozen=True)
class Deployment:
    # One machine whose cores every process shares; None: each replica has a core of its own.
    shared_cores: int | None = 2
    replicas: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(SERVICES, 1))
    detached_workers: int = 2
    max_jobs_per_session: int = 16
    # The database (0 cores: none modelled, SQLite in the store's process): time each store RPC holds one of its cores.
    db_cores: int = 0
    db_ms_per_call: float = 0.0


@dataclass
class Result:
    sessions: int
    turns: int
    seconds: float
    latencies_ms: list[float]
    busy: dict[str, float]
    # CPU ms the cluster spent per turn in the window (all processes, the client's and the sandboxes' included)
    cpu_ms_per_turn: float = 0.0
    jobs_open_at_end: int = 0
    jobs_done: int = 0
    # job runs done again because the commit's lease wait ran out (a player held the session throughout)
    job_reruns: int = 0

    @property
    def turns_per_s(self) -> float:
        return self.turns / self.seconds

    def p(self, fraction: float) -> float:
        ordered = sorted(self.latencies_ms) or [0.0]
        return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


class Cluster:
    """The processes, cores and database of one deployment, in a simpy environment."""

    def __init__(self, env: simpy.Environment, deployment: Deployment, profile: TurnProfile) -> None:
        self.env, self.deployment, self.profile = env, deployment, profile
        self.wakeup_ms = profile.wakeup_ms
        # When each process last finished a burst: one asked for after that finds it idle and pays its wakeup.
        self.idle_since: dict[simpy.Resource, float] = {}
        self.replicas = {s: [simpy.Resource(env, 1) for _ in range(max(1, deployment.replicas.get(s, 1)))] for s in SERVICES}
        self.client = simpy.Resource(env, 1)
        self.cores = simpy.Resource(env, deployment.shared_cores) if deployment.shared_cores else None
        self.db = simpy.Resource(env, deployment.db_cores) if deployment.db_cores else None
        self.busy_ms: dict[str, float] = dict.fromkeys([*SERVICES, "db"], 0.0)
        self.spent_ms = 0.0
        store_calls = max(1.0, profile.rpcs.get("store", 0.0))
        # One poll for the lease (or a look at the queue): one of the store's calls as a turn measures them.
        poll_ms = max(0.0, profile.cpu_ms.get("store", 0.0) / store_calls - profile.wakeup_ms)
        self.leases = Leases(self, deployment.max_jobs_per_session, poll_ms)
        self.queue = JobQueue(env, self.leases)

    def replica(self, service: str, session: int) -> simpy.Resource:
        pool = self.replicas[service]
        if service == "scheduler":  # a session's turns go to one scheduler (its lease)
            return pool[session % len(pool)]
        return min(pool, key=lambda r: len(r.queue) + r.count)

    def burst(self, process: simpy.Resource, ms: float, crowd_ms: float = 0.0) -> Process:
        woke = process.count == 0 and not process.queue and self.idle_since.get(process, -1.0) < self.env.now
        ms += self.wakeup_ms if woke else 0.0
        ms += crowd_ms * (len(process.queue) + process.count)
        with process.request() as held:
            yield held
            yield from self._on_a_core(ms)
            self.idle_since[process] = self.env.now
        self.spent_ms += ms

    def _on_a_core(self, ms: float) -> Process:
        if self.cores is None:
            yield self.env.timeout(ms / 1000)
            return
        with self.cores.request() as core:
            yield core
            yield self.env.timeout(ms / 1000)

    def _after(self, process: simpy.Resource, ms: float) -> Process:
        """Work a process does after it answered: its process and a core, off the turn's path."""
        with process.request() as held:
            yield held
            yield from self._on_a_core(ms)
        self.spent_ms += ms

    def call(self, burst: Burst, session: int) -> Process:
        """One burst of the turn on the service's replica, its sandbox's share, and for the store the database's."""
        process = self.replica(burst.service, session)
        later = burst.ms * self.profile.off_path
        yield from self.burst(process, burst.ms - later, self.profile.crowd_ms)
        if later:
            self.env.process(self._after(process, later))
        if burst.sandbox_ms:
            # Sandbox workers are processes of their own (one per plugin): they take cores, not their service's turn.
            yield from self._on_a_core(burst.sandbox_ms)
            self.spent_ms += burst.sandbox_ms
        self.busy_ms[burst.service] += burst.ms + burst.sandbox_ms
        if burst.service == "store" and self.db is not None:
            with self.db.request() as db:
                yield db
                yield self.env.timeout(self.deployment.db_ms_per_call / 1000)
            self.busy_ms["db"] += self.deployment.db_ms_per_call

    def run(self, bursts: list[Burst], session: int) -> Process:
        for one in bursts:
            yield from self.call(one, session)

    def client_burst(self, ms: float, *, on_path: bool) -> Process:
        if self.cores is None or not ms:
            return
        if on_path:
            yield from self.burst(self.client, ms)
        else:
            self.env.process(self.burst(self.client, ms))


def _player(cluster: Cluster, profile: TurnProfile, session: int, think_s: float, start_s: float,
            window: tuple[float, float], latencies: list[float]) -> Process:
    """A player's turns: the client sends, the scheduler takes the lease with its first store call, runs the turn
    (its model wait halfway), commits with its last store call and queues the jobs; the client reads the stream,
    its last message on the turn's path."""
    env, bursts = cluster.env, hops(profile)
    stores = store_indices(bursts)
    take, release = (stores[0], stores[-1]) if stores else (len(bursts) - 1, len(bursts) - 1)
    middle = (take + 1 + release + 1) // 2
    client_ms = max(0.0, profile.client_ms / (profile.client_messages + 1) - profile.wakeup_ms)
    yield env.timeout(start_s)
    while True:
        started = env.now
        yield from cluster.client_burst(client_ms, on_path=True)
        yield from cluster.run(bursts[:take], session)
        yield from cluster.leases.for_player(session, bursts[take])
        yield from cluster.run(bursts[take + 1:middle], session)
        if profile.model_s:
            yield env.timeout(profile.model_s)
        for _ in range(profile.client_messages - 1):
            yield from cluster.client_burst(client_ms, on_path=False)
        yield from cluster.run(bursts[middle:release + 1], session)
        cluster.leases.release(session, by_job=False)
        cluster.queue.put(session, profile.jobs if profile.job is not None else 0)
        yield from cluster.run(bursts[release + 1:], session)
        yield from cluster.client_burst(client_ms, on_path=True)
        if window[0] <= env.now <= window[1]:
            latencies.append((env.now - started) * 1000)
        if think_s:
            yield env.timeout(think_s)


def simulate(profile: TurnProfile, deployment: Deployment, sessions: int, *, think_s: float = 0.0,
             seconds: float = 20.0, warmup_s: float = 3.0, backlog_jobs: int = 0) -> Result:
    """`sessions` players, each playing turns back to back (or with `think_s` between them), for `seconds` after
    `warmup_s`; players with think time start spread over it. `backlog_jobs`: each session's jobs queued before."""
    env = simpy.Environment()
    cluster = Cluster(env, deployment, profile)
    if profile.job is not None:
        for session in range(sessions):
            cluster.queue.put(session, backlog_jobs)
        if profile.jobs or backlog_jobs:
            for _ in range(deployment.detached_workers * len(cluster.replicas["scheduler"])):
                env.process(worker(cluster, profile.job))
    latencies: list[float] = []
    window = (warmup_s, warmup_s + seconds)
    for session in range(sessions):
        # Spread over a turn's pause, or (back to back) over the first START_SPREAD_S, so that symmetric sessions do not
        # play in lockstep.
        start = (zlib.crc32(str(session).encode()) % 1000) / 1000 * (think_s + profile.model_s if think_s else START_SPREAD_S)
        env.process(_player(cluster, profile, session, think_s, start, window, latencies))
    env.run(until=window[0])
    spent_before = cluster.spent_ms
    env.run(until=window[1])
    # Busy shares over the whole run (warm-up included).
    capacity = {s: window[1] * 1000 * len(cluster.replicas[s]) for s in SERVICES}
    capacity["db"] = window[1] * 1000 * max(1, deployment.db_cores)
    busy = {s: cluster.busy_ms[s] / capacity[s] for s in capacity}
    return Result(sessions, len(latencies), seconds, latencies, busy,
                  cpu_ms_per_turn=(cluster.spent_ms - spent_before) / max(1, len(latencies)),
                  jobs_open_at_end=cluster.queue.open_jobs(), jobs_done=cluster.queue.done, job_reruns=cluster.queue.reruns)


def summary(result: Result) -> dict[str, float]:
    return {"sessions": result.sessions, "turns_per_s": result.turns_per_s, "p50_ms": result.p(0.5), "p95_ms": result.p(0.95),
            "mean_ms": statistics.fmean(result.latencies_ms) if result.latencies_ms else 0.0,
            "cpu_ms_per_turn": result.cpu_ms_per_turn, "jobs_open_at_end": result.jobs_open_at_end, "jobs_done": result.jobs_done,
            "job_reruns": result.job_reruns}
