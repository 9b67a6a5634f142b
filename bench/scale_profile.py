"""What one turn costs, as measured, and the bursts of CPU it is in the model (bench/scale_sim.py).

A turn is the chain of calls the scheduler makes. Each peer serves it unary RPCs (the store's lease, reads and
commit; the story's Generate; each call stream's opening) and messages on the streams a turn holds open (its hook
calls on TurnHooks, its model calls on TurnModelCalls, the hooks service's `ctx.state` on HookStateCalls;
shared/call_streams.py), a message costing `message_weight` of a call (bench.call_vs_message). A service's measured
CPU per turn is spread over what it serves by that weight, with a burst of the scheduler's own CPU before each
(likewise weighted) and one at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

SERVICES = ("scheduler", "store", "hooks", "gateway", "registry")
# What a message on an open stream costs against a unary call, both ends (bench.call_vs_message, load 13: 447 against
# 1,156 µs; the services' own checks and interceptors run for both).
MESSAGE_WEIGHT = 0.4


@dataclass(frozen=True)
class TurnProfile:
    """What one turn costs, as measured (bench.turn_latency, bench.job_costs)."""

    name: str
    # service -> its process's CPU ms per turn; unary RPCs it serves per turn (the scheduler: the client's)
    cpu_ms: Mapping[str, float]
    rpcs: Mapping[str, float]
    # service -> calls it serves per turn as messages on a stream (turn_latency's stream_calls_per_turn)
    messages: Mapping[str, float] = field(default_factory=dict)
    # service -> CPU ms per turn of its plugin sandbox's processes
    sandbox_ms: Mapping[str, float] = field(default_factory=dict)
    # the client process's CPU per turn (sending the actions, reading the turn's stream) and the messages it reads
    client_ms: float = 0.0
    client_messages: int = 1
    # detached jobs a turn queues, and what one costs (bench.job_costs)
    jobs: int = 0
    job: TurnProfile | None = None
    # time the turn waits on models (no CPU), seconds
    model_s: float = 0.0
    # CPU a process spends to wake for work when it was idle (epoll, gRPC's completion queue, the loop): part of
    # each burst's measured cost on one session, where every burst finds its process idle; shared under load.
    wakeup_ms: float = 0.0
    # The share of each burst's CPU spent after it answered (post-commit work, renewals, gRPC's threads).
    off_path: float = 0.0
    # CPU a burst spends more for each other burst waiting for its process (fitted; bench.concurrency measures a
    # narrator turn's CPU rising from 8 sessions to 32, 49.8 -> 63.6 ms at load 12.5, the store's 22 -> 33 ms).
    crowd_ms: float = 0.0
    message_weight: float = MESSAGE_WEIGHT
    # A detached job's store calls for its commit: 1 (CommitTurn takes the lease and ends the job) or 3 (the tree
    # before services/store/job_commits.py: AcquireTurnLease, CommitTurn, CompleteDetachedJob).
    commit_calls: int = 1


class Burst(NamedTuple):
    service: str
    ms: float
    sandbox_ms: float


def _positions(profile: TurnProfile, lead: int, tail: int) -> list[tuple[float, str, float]]:
    """(place in the turn, service, weight) of each call and stream message: each kind spread evenly through the
    turn; the store's first `lead` calls first and its last `tail` calls last (the lease, the commit)."""
    calls: list[tuple[float, str, float]] = []
    for service in SERVICES[1:]:
        count = round(profile.rpcs.get(service, 0.0))
        places = [(k + 0.5) / count for k in range(count)]
        if service == "store" and count:
            head, back = min(lead, count), min(tail, count - min(lead, count))
            places = [-1 + k / count for k in range(head)] + places[head:count - back] + [2 + k / count for k in range(back)]
        calls += [(place, service, 1.0) for place in places]
        sent = round(profile.messages.get(service, 0.0))
        calls += [((k + 0.5) / sent, service, profile.message_weight) for k in range(sent)]
    return sorted(calls)


def hops(profile: TurnProfile, lead: int = 1, tail: int = 1) -> list[Burst]:
    """The turn as bursts in call order: a scheduler burst before each call or message and one at the end, each
    service's CPU (and its sandbox's) spread over what it serves by weight, less the wakeup the cluster adds back."""
    calls = _positions(profile, lead, tail)
    units = {service: sum(w for _, s, w in calls if s == service) for service in SERVICES[1:]}
    own_units = sum(w for _, _, w in calls) + 1.0

    def burst(service: str, weight: float, total: float) -> Burst:
        ms = profile.cpu_ms.get(service, 0.0) * weight / total
        return Burst(service, max(0.0, ms - profile.wakeup_ms), profile.sandbox_ms.get(service, 0.0) * weight / total)

    out: list[Burst] = []
    for _, service, weight in calls:
        out += [burst("scheduler", weight, own_units), burst(service, weight, units[service])]
    return [*out, burst("scheduler", 1.0, own_units)]


def store_indices(bursts: list[Burst]) -> list[int]:
    return [index for index, b in enumerate(bursts) if b.service == "store"]


