"""A discrete-event model of the five services under many sessions (simpy), fed by measured per-turn costs.

A turn is the chain of calls the scheduler makes: a burst of the scheduler's CPU before each RPC, then the CPU
the called service spends on it (and its plugin sandbox, for hooks and the scheduler's own functions), each
service's per-turn CPU spread evenly over the RPCs it serves. A service process runs one burst at a time (one
Python process, one GIL): a burst waits for its process, then for a core. On one machine every process (the
client too) shares the machine's cores; in a deployment each replica has a core of its own and the store's calls
also take database time. A turn of the demo world queues detached jobs (smaller turns) that the scheduler
replicas' workers run; a session with `max_jobs_per_session` jobs still open waits before its next turn.
"""

from __future__ import annotations

import statistics
import zlib
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field, replace

import simpy

# A simpy process: a generator of the events it waits for.
Process = Generator[simpy.Event, object, None]
SERVICES = ("scheduler", "store", "hooks", "gateway", "registry")
# The store's lease polls and the scheduler's wait for it (services/store/leases.py, scheduler_lease_wait_ms).
POLL_FIRST_S, POLL_MAX_S, LEASE_WAIT_S, QUEUE_FULL_RETRY_S = 0.02, 0.25, 10.0, 2.0


@dataclass(frozen=True)
class TurnProfile:
    """What one turn costs, as measured (bench.turn_latency)."""

    name: str
    # service -> its process's CPU ms per turn; RPCs it serves per turn (the scheduler: the client's)
    cpu_ms: Mapping[str, float]
    rpcs: Mapping[str, float]
    # service -> CPU ms per turn of its plugin sandbox's processes
    sandbox_ms: Mapping[str, float] = field(default_factory=dict)
    # the client process's CPU per turn (reading the turn's stream)
    client_ms: float = 0.0
    # detached jobs a turn queues, and what one costs (bench.job_costs)
    jobs: int = 0
    job: TurnProfile | None = None
    # time the turn waits on models (no CPU), seconds
    model_s: float = 0.0
    # CPU a process spends to wake for work when it was idle (epoll, gRPC's completion queue, the loop): part of
    # each burst's measured cost on one session, where every burst finds its process idle; shared under load.
    wakeup_ms: float = 0.0


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

    @property
    def turns_per_s(self) -> float:
        return self.turns / self.seconds

    def p(self, fraction: float) -> float:
        ordered = sorted(self.latencies_ms) or [0.0]
        return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def hops(profile: TurnProfile) -> list[tuple[str, float, float]]:
    """The turn as (service, CPU ms, sandbox CPU ms) bursts in call order: each peer's calls spread evenly
    through the turn, a scheduler burst before each and one at the end."""
    calls: list[tuple[float, str]] = []
    for service in SERVICES[1:]:
        count = round(profile.rpcs.get(service, 0.0))
        calls += [((k + 0.5) / count, service) for k in range(count)]
    calls.sort()
    counts = {service: sum(1 for _, s in calls if s == service) for service in SERVICES[1:]}
    own = max(0.0, profile.cpu_ms.get("scheduler", 0.0) / (len(calls) + 1) - profile.wakeup_ms)
    own_sandbox = profile.sandbox_ms.get("scheduler", 0.0) / (len(calls) + 1)
    out: list[tuple[str, float, float]] = []
    for _, service in calls:
        out.append(("scheduler", own, own_sandbox))
        out.append((service, max(0.0, profile.cpu_ms.get(service, 0.0) / counts[service] - profile.wakeup_ms),
                    profile.sandbox_ms.get(service, 0.0) / counts[service]))
    out.append(("scheduler", own, own_sandbox))
    return out


class Cluster:
    """The processes, cores and database of one deployment, in a simpy environment."""

    def __init__(self, env: simpy.Environment, deployment: Deployment, wakeup_ms: float = 0.0) -> None:
        self.env, self.deployment, self.wakeup_ms = env, deployment, wakeup_ms
        # When each process last finished a burst: one asked for after that finds it idle and pays its wakeup.
        self.idle_since: dict[simpy.Resource, float] = {}
        self.replicas = {s: [simpy.Resource(env, 1) for _ in range(max(1, deployment.replicas.get(s, 1)))] for s in SERVICES}
        self.client = simpy.Resource(env, 1)
        self.cores = simpy.Resource(env, deployment.shared_cores) if deployment.shared_cores else None
        self.db = simpy.Resource(env, deployment.db_cores) if deployment.db_cores else None
        self.jobs: simpy.Store = simpy.Store(env)
        self.busy_ms: dict[str, float] = dict.fromkeys([*SERVICES, "db"], 0.0)
        self.spent_ms = 0.0
        # Sessions whose turn lease is held, and what one poll for it costs the store.
        self.holders: set[int] = set()
        self.poll_ms = 0.0

    def take_lease(self, session: int, *, is_job: bool, open_jobs: dict[int, int] | None = None) -> Process:
        """The session's turn lease as the store hands it out (services/store/leases.py): one turn of a session at a
        time, its detached jobs' included; a player's turn also waits while the session has too many jobs open.
        A waiting caller polls (20 ms, doubling to 250 ms), each poll a store call; after the scheduler's 10 s
        wait a refused player's client sleeps the 2 s its RetryInfo asks and submits again."""
        pause, waited = POLL_FIRST_S, 0.0
        while True:
            full = not is_job and open_jobs is not None and open_jobs[session] >= self.deployment.max_jobs_per_session
            if session not in self.holders and not full:
                self.holders.add(session)
                return
            if waited >= LEASE_WAIT_S:
                yield self.env.timeout(QUEUE_FULL_RETRY_S)
                pause, waited = POLL_FIRST_S, 0.0
                continue
            yield self.env.timeout(pause)
            waited += pause
            pause = min(2 * pause, POLL_MAX_S)
            yield from self.burst(self.replica("store", session), self.poll_ms)

    def replica(self, service: str, session: int) -> simpy.Resource:
        pool = self.replicas[service]
        if service == "scheduler":  # a session's turns go to one scheduler (its lease)
            return pool[session % len(pool)]
        return min(pool, key=lambda r: len(r.queue) + r.count)

    def burst(self, process: simpy.Resource, ms: float) -> Process:
        woke = process.count == 0 and not process.queue and self.idle_since.get(process, -1.0) < self.env.now
        ms += self.wakeup_ms if woke else 0.0
        with process.request() as held:
            yield held
            if self.cores is None:
                yield self.env.timeout(ms / 1000)
            else:
                with self.cores.request() as core:
                    yield core
                    yield self.env.timeout(ms / 1000)
            self.idle_since[process] = self.env.now
        self.spent_ms += ms

    def run_hops(self, bursts: list[tuple[str, float, float]], session: int) -> Process:
        for service, ms, sandbox_ms in bursts:
            yield from self.burst(self.replica(service, session), ms + (sandbox_ms if self.cores is None else 0.0))
            if self.cores is not None and sandbox_ms:
                # Sandbox workers are processes of their own (one per plugin): they take cores, not their service's turn.
                self.env.process(self._on_a_core(sandbox_ms))
            self.busy_ms[service] += ms + sandbox_ms
            if service == "store" and self.db is not None:
                with self.db.request() as db:
                    yield db
                    yield self.env.timeout(self.deployment.db_ms_per_call / 1000)
                self.busy_ms["db"] += self.deployment.db_ms_per_call


    def _on_a_core(self, ms: float) -> Process:
        assert self.cores is not None
        with self.cores.request() as core:
            yield core
            yield self.env.timeout(ms / 1000)


def _worker(cluster: Cluster, profile: TurnProfile, open_jobs: dict[int, int]) -> Process:
    assert profile.job is not None
    bursts = hops(replace(profile.job, wakeup_ms=profile.wakeup_ms))
    while True:
        session = yield cluster.jobs.get()
        assert isinstance(session, int)
        yield from cluster.take_lease(session, is_job=True)  # a job is a turn of its session: it needs the lease too
        yield from cluster.run_hops(bursts, session)
        cluster.holders.discard(session)
        open_jobs[session] -= 1


def _player(cluster: Cluster, profile: TurnProfile, session: int, think_s: float, start_s: float, window: tuple[float, float],
            latencies: list[float], open_jobs: dict[int, int]) -> Process:
    env, bursts = cluster.env, hops(profile)
    yield env.timeout(start_s)
    while True:
        started = env.now
        if cluster.cores is not None and profile.client_ms:
            # The client reads the stream while the services work: its own process, off the turn's path.
            env.process(cluster.burst(cluster.client, max(0.0, profile.client_ms - profile.wakeup_ms)))
        yield from cluster.take_lease(session, is_job=False, open_jobs=open_jobs)
        yield from cluster.run_hops(bursts[: len(bursts) // 2], session)
        if profile.model_s:
            yield env.timeout(profile.model_s)
        yield from cluster.run_hops(bursts[len(bursts) // 2 :], session)
        cluster.holders.discard(session)
        for _ in range(profile.jobs):
            open_jobs[session] += 1
            cluster.jobs.put(session)
        if window[0] <= env.now <= window[1]:
            latencies.append((env.now - started) * 1000)
        if think_s:
            yield env.timeout(think_s)


def simulate(profile: TurnProfile, deployment: Deployment, sessions: int, *, think_s: float = 0.0,
             seconds: float = 20.0, warmup_s: float = 3.0, backlog_jobs: int = 0) -> Result:
    """`sessions` players, each playing turns back to back (or with `think_s` between them), for `seconds` after
    `warmup_s`; players with think time start spread over it."""
    env = simpy.Environment()
    cluster = Cluster(env, deployment, profile.wakeup_ms)
    store_calls = max(1.0, profile.rpcs.get("store", 0.0))
    cluster.poll_ms = max(0.0, profile.cpu_ms.get("store", 0.0) / store_calls - profile.wakeup_ms)
    # Jobs each session has queued when play starts (those of the turns before, e.g. its setup's).
    open_jobs = dict.fromkeys(range(sessions), backlog_jobs if profile.job is not None else 0)
    if profile.jobs and profile.job is not None:
        for _ in range(deployment.detached_workers * len(cluster.replicas["scheduler"])):
            env.process(_worker(cluster, profile, open_jobs))
    for _ in range(backlog_jobs if profile.job is not None else 0):
        for session in range(sessions):
            cluster.jobs.put(session)
    latencies: list[float] = []
    window = (warmup_s, warmup_s + seconds)
    for session in range(sessions):
        start = (zlib.crc32(str(session).encode()) % 1000) / 1000 * (think_s + profile.model_s if think_s else 0.0)
        env.process(_player(cluster, profile, session, think_s, start, window, latencies, open_jobs))
    env.run(until=window[1])
    # Busy shares over the whole run (warm-up included).
    capacity = {s: window[1] * 1000 * len(cluster.replicas[s]) for s in SERVICES}
    capacity["db"] = window[1] * 1000 * max(1, deployment.db_cores)
    busy = {s: cluster.busy_ms[s] / capacity[s] for s in capacity}
    return Result(sessions, len(latencies), seconds, latencies, busy)


def summary(result: Result) -> dict[str, float]:
    return {"sessions": result.sessions, "turns_per_s": result.turns_per_s, "p50_ms": result.p(0.5), "p95_ms": result.p(0.95),
            "mean_ms": statistics.fmean(result.latencies_ms) if result.latencies_ms else 0.0}
