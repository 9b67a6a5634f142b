"""What a turn costs each service process: CPU time (from /proc/<pid>/stat), RPCs per method and
messages per server stream (from each service's /metrics), read before and after the measured turns."""

from __future__ import annotations

import contextlib
import os
import socket
from collections import Counter
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from covel_cli.launcher import SERVICES, ServiceGroup

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def metrics_env() -> tuple[dict[str, str], dict[str, int]]:
    """Environment that turns /metrics on for each service on a free loopback port, and the ports."""
    ports = {}
    for name in SERVICES:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports[name] = probe.getsockname()[1]
    return {f"COVEL_{name.upper()}_METRICS_PORT": str(port) for name, port in ports.items()}, ports


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as stat:
        # The command name (field 2) may hold spaces: count fields after its closing parenthesis.
        fields = stat.read().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / CLOCK_TICKS_PER_S


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as listed:
                found += [int(child) for child in listed.read().split()]
    return found


def descendants_cpu_seconds(pid: int) -> float:
    """CPU of a process's live descendants (its plugin sandbox's zygote and workers), with the CPU of the
    children they reaped (a retired worker's time is in its zygote's cutime/cstime)."""
    total, todo = 0.0, _children(pid)
    while todo:
        child = todo.pop()
        with contextlib.suppress(OSError):
            with open(f"/proc/{child}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += sum(int(value) for value in fields[11:15]) / CLOCK_TICKS_PER_S
            todo += _children(child)
    return total


@dataclass
class Snapshot:
    cpu_s: dict[str, float] = field(default_factory=dict)
    # CPU of each service's sandbox (its descendant processes)
    sandbox_cpu_s: dict[str, float] = field(default_factory=dict)
    # (service, method) -> count
    rpcs: Counter = field(default_factory=Counter)
    sent: Counter = field(default_factory=Counter)
    # (service, "<method>.<kind>") -> calls a turn's call streams carried (covel_stream_calls_total)
    calls: Counter = field(default_factory=Counter)


def snapshot(group: ServiceGroup, ports: dict[str, int]) -> Snapshot:
    taken = Snapshot(cpu_s={name: cpu_seconds(process.pid) for name, process in group.processes.items()},
                     sandbox_cpu_s={name: descendants_cpu_seconds(process.pid) for name, process in group.processes.items()})
    for name, port in ports.items():
        page = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        for family in text_string_to_metric_families(page):
            for sample in family.samples:
                if sample.name == "grpc_server_started_total":
                    taken.rpcs[(name, sample.labels["grpc_method"])] += sample.value
                elif sample.name == "grpc_server_msg_sent_total":
                    taken.sent[(name, sample.labels["grpc_method"])] += sample.value
                elif sample.name == "covel_stream_calls_total":
                    taken.calls[(name, f"{sample.labels['method']}.{sample.labels['kind']}")] += sample.value
    return taken


def per_turn(before: Snapshot, after: Snapshot, turns: int) -> dict:
    """CPU ms per turn per process, RPCs per turn per method, messages per stream per method and the calls a turn's
    call streams carried per turn, by kind."""
    rpcs = after.rpcs - before.rpcs
    sent = after.sent - before.sent
    calls = after.calls - before.calls
    return {
        "cpu_ms_per_turn": {name: (after.cpu_s[name] - before.cpu_s[name]) * 1000 / turns for name in after.cpu_s},
        "sandbox_cpu_ms_per_turn": {name: (after.sandbox_cpu_s[name] - before.sandbox_cpu_s[name]) * 1000 / turns
                                    for name in after.sandbox_cpu_s if after.sandbox_cpu_s[name] or before.sandbox_cpu_s[name]},
        "rpcs_per_turn": {f"{service}.{method}": count / turns for (service, method), count in sorted(rpcs.items())},
        "stream_calls_per_turn": {f"{service}.{kind}": count / turns for (service, kind), count in sorted(calls.items())},
        "messages_per_stream": {f"{service}.{method}": sent[key] / rpcs[key] for key in sorted(sent)
                                for service, method in [key] if rpcs[key]},
    }
