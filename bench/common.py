"""What the benchmarks share: starting the services (five processes or one), playing a turn,
percentiles, and writing bench/results/<name>.json."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import grpc

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel_cli.in_process import InProcessGroup, unix_socket_addrs
from covel_cli.launcher import SERVICES, ServiceGroup, free_port_addrs
from shared.errors import retry_after_ms
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct, to_struct
from shared.turn_event_batches import events_of
from tests.support.builtin_plugins import non_story_core_plugin_ids

RESULTS = Path(__file__).parent / "results"
# Quiet services: logging every RPC would be part of what is measured.
# One validation cache (services/registry/validation_cache.py, keyed by each package's files and the kernel's) for every
# registry the benches start: without it each group's registry imports every plugin's entry module again in probe
# processes first, which on a loaded 2-core machine took past the hooks service's wait for the registry (30 s).
BENCH_ENV = {"COVEL_LOG_LEVEL": "warning",
             "COVEL_REGISTRY_CACHE_DIR": os.environ.get("COVEL_REGISTRY_CACHE_DIR") or str(RESULTS / "registry-cache")}
PROCESSES, IN_PROCESS = "processes", "in-process"
TCP, UNIX = "tcp", "unix"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def summarize(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 0.5), "p95": percentile(values, 0.95), "mean": statistics.fmean(values), "n": len(values)}


def write_result(name: str, data: object) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def plugin_dirs_env(*extra: Path) -> dict[str, str]:
    return {"COVEL_PLUGIN_DIRS": os.pathsep.join([str(REPO_ROOT / "plugins"), *map(str, extra)])}


@contextlib.asynccontextmanager
async def running_services(
    mode: str = PROCESSES, transport: str = TCP, extra_env: dict[str, str] | None = None
) -> AsyncIterator[ServiceGroup | InProcessGroup]:
    """The five services on fresh addresses with a fresh SQLite database; stopped after."""
    # Short folder name: unix socket paths are limited to ~100 bytes.
    with tempfile.TemporaryDirectory(prefix="cvb") as folder:
        root = Path(folder)
        addrs = unix_socket_addrs(root) if transport == UNIX else free_port_addrs()
        env = {**BENCH_ENV, **(extra_env or {})}
        group: ServiceGroup | InProcessGroup
        group = InProcessGroup(addrs, root / "data", env) if mode == IN_PROCESS else ServiceGroup(addrs, root / "data", env)
        try:
            # Inside: a service that fails to start must not leave the others of its group running.
            await group.start()
            await wait_turns_work(group.addrs["scheduler"])
            yield group
        finally:
            await group.stop()


async def wait_turns_work(scheduler_addr: str, timeout_s: float = 15.0) -> None:
    """Play one turn, retrying while a peer is UNAVAILABLE.

    The launcher starts the five processes together, so the scheduler's channels may first
    dial a peer that is not listening yet and sit in gRPC's reconnect backoff (about 1 s)
    although every service reports SERVING.
    """
    deadline = time.monotonic() + timeout_s
    async with open_channel(scheduler_addr) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        while True:
            try:
                session = await create_session(stub)
                await play_turn(stub, session.id, "I look around.")
                return
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


async def create_session(stub: scheduler_pb2_grpc.SchedulerStub, *, excluded_plugins=(), **fields) -> resources_pb2.Session:
    """A session of the narrator and the requested plugins: the other core plugins (world-time, memory,
    history-compaction) are left out so that figures measure the same turn as the kernel grows."""
    excluded = [*non_story_core_plugin_ids(), *excluded_plugins]
    return (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(excluded_plugins=excluded, **fields))).session


# cost-gate's caps out of reach: past its soft cap (200,000 tokens, about a dozen demo-world turns with their
# detached jobs) only the story runs, past its hard cap turns are refused, so a run would measure a turn that
# changes partway, at a point that moves with when the detached jobs run.
UNCAPPED = {"cost-gate": {"softCapTokens": 10**12, "hardCapTokens": 10**12}}


async def world_session(stub: scheduler_pb2_grpc.SchedulerStub, world: str, plugin_settings: dict | None = None,
                        excluded_plugins: tuple[str, ...] = ()) -> str:
    """A session in `world` with its whole plugin set (but `excluded_plugins`), taken through its setup (docs/setup.md:
    an `advance`, each open form answered with its defaults and a name, the opening), so what is measured is play;
    cost-gate uncapped (UNCAPPED) unless `plugin_settings` says otherwise."""
    settings = {plugin: to_struct(values) for plugin, values in {**UNCAPPED, **(plugin_settings or {})}.items()}
    session_id = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
        world_id=world, plugin_settings=settings, excluded_plugins=list(excluded_plugins)))).session.id
    advance = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="advance")])
    [event async for event in stub.SubmitActions(advance)]
    for record in (await stub.ListInteractions(scheduler_pb2.ListInteractionsRequest(session_id=session_id))).interactions:
        fields = from_struct(record.interaction.spec).get("schema", {}).get("properties", {})
        values = {name: field["default"] for name, field in fields.items() if "default" in field} | {"name": "Bench"}
        request = scheduler_pb2.SubmitInteractionRequest(session_id=session_id, interaction_id=record.interaction.id, values=to_struct(values))
        [event async for event in stub.SubmitInteraction(request)]
    return session_id


T = TypeVar("T")


async def after_retry_info(attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt()`, made again after each RetryInfo delay as a client does (docs/retries.md: back-pressure, a busy
    session); an error without RetryInfo raises."""
    while True:
        try:
            return await attempt()
        except grpc.aio.AioRpcError as error:
            wait_ms = retry_after_ms(error)
            if wait_ms is None:
                raise
            await asyncio.sleep(wait_ms / 1000)


async def play_turn(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, text: str) -> tuple[float, float, resources_pb2.Turn]:
    """One turn end to end: (wall ms, ms to the first story text, the turn as recorded); a turn that did not commit raises."""
    elapsed, first_text, turn, _ = await play_counted_turn(stub, session_id, text)
    return elapsed, first_text, turn


async def play_counted_turn(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, text: str
                            ) -> tuple[float, float, resources_pb2.Turn, int]:
    """`play_turn`, and how many messages the SubmitActions stream sent (it asks for batches, as the repo's clients do)."""
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex, batch_events=True)
    started = time.perf_counter()
    first_text = None
    last = None
    messages = 0

    async def stream() -> None:
        nonlocal first_text, last, messages
        async for message in stub.SubmitActions(request):
            messages += 1
            for event in events_of(message):
                if first_text is None and event.WhichOneof("event") == "narrative_delta":
                    first_text = time.perf_counter() - started
                last = event

    await after_retry_info(stream)
    elapsed = time.perf_counter() - started
    if last is None or last.WhichOneof("event") != "turn_completed":
        raise RuntimeError("the turn stream ended without turn_completed")
    turn = last.turn_completed
    if turn.status != resources_pb2.TURN_STATUS_COMMITTED:
        failures = [f"{r.runtime_id}: {r.reason}" for r in turn.runtime_results if r.status != resources_pb2.RUNTIME_STATUS_SUCCESS]
        raise RuntimeError(f"turn did not commit ({resources_pb2.TurnStatus.Name(turn.status)}): {turn.abort_reason or failures}")
    return elapsed * 1000, (first_text if first_text is not None else elapsed) * 1000, turn, messages


async def play_back_to_back(stubs: list, ids: list[str], seconds: float, failures: list[str] | None = None) -> list[float]:
    """Session i (on stubs[i]) plays turns back to back until `seconds` pass; the wall time of each turn that
    ended within them. A failing turn is kept in `failures` when given (else it raises)."""
    latencies: list[float] = []
    end = time.perf_counter() + seconds

    async def player(index: int) -> None:
        step = 0
        while time.perf_counter() < end:
            try:
                elapsed, _, _ = await play_turn(stubs[index], ids[index], f"Player {index} walks on, step {step}.")
            except Exception as error:  # a failing turn must show in the result, not vanish
                if failures is None:
                    raise
                failures.append(str(error)[:200])
                continue
            finally:
                step += 1
            if time.perf_counter() <= end:
                latencies.append(elapsed)

    await asyncio.gather(*(player(index) for index in range(len(ids))))
    return latencies


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A GitHub-flavoured markdown table (also readable as plain text)."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(headers[i]), *(len(row[i]) for row in cells)) for i in range(len(headers))]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    # Numbers line up on the right, words on the left.
    lines += ["| " + " | ".join(c.rjust(w) if isinstance(v, (int, float)) else c.ljust(w)
                                for c, w, v in zip(cells_row, widths, row)) + " |"
              for cells_row, row in zip(cells, rows)]
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


__all__ = ["SERVICES", "PROCESSES", "IN_PROCESS", "TCP", "UNIX", "running_services", "play_turn", "create_session",
           "summarize", "percentile", "write_result", "table", "plugin_dirs_env", "RESULTS"]


def write_observer_plugin(folder: Path, description: str, events: tuple[str, ...] | list[str], *, watch: bool = False) -> None:
    """A plugin package at `folder` with one no-op handler (returns None) for each of `events`; with `watch`, each is a
    watcher (observe=True: the kernel may hold its event and send it with the turn's others, docs/hooks.md)."""
    (folder / "server").mkdir(parents=True)
    (folder / "PLUGIN.md").write_text(
        f"---\nversion: 0.1.0\ndescription: {description}\ncontributes:\n  hooks: [{', '.join(events)}]\n---\n")
    (folder / "server" / "index.py").write_text(
        "def register(covel):\n" + "".join(f"    covel.on({event!r}, observe{', observe=True' if watch else ''})\n" for event in events)
        + "\n\ndef observe(ctx, payload):\n    return None\n")
