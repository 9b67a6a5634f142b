"""Every execution is one trace, and the API says which: a detached job's execution is a trace of its
own linked to its source turn's, idle queue polls make no trace, Turn records name their trace and
source turn, and console spans stay out of the JSON log files. The five services as real processes."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.launcher import SERVICES, ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from tests.e2e.conftest import minimal_session
from tests.telemetry.otlp_receiver import OtlpReceiver

PROBE_DIR = REPO_ROOT / "tests" / "fixtures" / "plugins"
IDLE_S = 3.0


async def _settled(receiver: OtlpReceiver, quiet_s: float = 1.0, timeout_s: float = 20.0) -> set[str]:
    """The trace ids received once no new span has arrived for `quiet_s`."""
    seen, loop = -1, asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        count = len(receiver.snapshot())
        if count == seen:
            break
        seen = count
        await asyncio.sleep(quiet_s)
    return {span.trace_id for span in receiver.snapshot()}


async def _finished_job(store, session_id: str) -> store_pb2.DetachedJob:
    for _ in range(200):
        jobs = (await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session_id))).jobs
        if jobs and jobs[0].status not in ("queued", "running"):
            return jobs[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"the detached job did not finish: {jobs}")


@dataclass
class Traced:
    group: ServiceGroup
    receiver: OtlpReceiver
    # Trace ids that arrived before the turn: at startup, and while idle.
    startup: set[str]
    idle: set[str]
    player: store_pb2.Turn
    job: store_pb2.DetachedJob
    # ListTurns' turns, and GetTurn's answer for each.
    turns: list[store_pb2.Turn]
    got: dict[str, store_pb2.Turn]
    # Trace ids that arrived before the services stopped (gateway:shutdown starts a trace of its own).
    served: set[str]

    @property
    def background(self) -> store_pb2.Turn:
        return next(turn for turn in self.turns if turn.origin == resources_pb2.TURN_ORIGIN_BACKGROUND)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def traced(tmp_path_factory):
    """The services exporting spans to an OTLP/HTTP receiver and to the console, polling the job queue
    every 50 ms; idle for a while, then a turn of the detached probe and its background job."""
    with OtlpReceiver() as receiver:
        env = {
            "COVEL_PLUGIN_DIRS": f"{REPO_ROOT / 'plugins'}:{PROBE_DIR}",
            "COVEL_LOG_LEVEL": "info",
            "OTEL_TRACES_EXPORTER": "otlp,console",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "COVEL_SCHEDULER_DETACHED_POLL_MS": "50",
        }
        group = ServiceGroup(free_port_addrs(), tmp_path_factory.mktemp("traced"), extra_env=env)
        try:
            await group.start()
            before_idle = await _settled(receiver)
            await asyncio.sleep(IDLE_S)
            idle = await _settled(receiver) - before_idle
            async with open_channel(group.addrs["scheduler"]) as channel, group.channel_as("store", "scheduler") as store_channel:
                stub = scheduler_pb2_grpc.SchedulerStub(channel)
                store = store_pb2_grpc.TransactionalStoreStub(store_channel)
                session = (await stub.CreateSession(minimal_session(requested_plugins=["detached-probe"], approved_plugins=["detached-probe"]))).session
                request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I light the lamp.")])
                [player] = [e.turn_completed async for e in stub.SubmitActions(request) if e.WhichOneof("event") == "turn_completed"]
                job = await _finished_job(store, session.id)
                turns = list((await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))).turns)
                got = {turn.id: (await stub.GetTurn(scheduler_pb2.GetTurnRequest(session_id=session.id, turn_id=turn.id))).turn
                       for turn in turns}
            served = await _settled(receiver)
        finally:
            await group.stop()
        yield Traced(group, receiver, before_idle, idle, player, job, turns, got, served)


async def test_idle_queue_polls_make_no_trace(traced):
    assert traced.idle == set(), f"{len(traced.idle)} traces in {IDLE_S:.0f} idle seconds"


async def test_turn_records_name_their_trace_and_a_background_turn_its_source(traced):
    player, job, turns, got, background = traced.player, traced.job, traced.turns, traced.got, traced.background
    assert job.status == "succeeded", job.error
    by_origin = {turn.origin: turn for turn in turns}
    assert set(by_origin) == {resources_pb2.TURN_ORIGIN_PLAYER, resources_pb2.TURN_ORIGIN_BACKGROUND}
    for turn in turns:
        assert len(turn.trace_id) == 32 and int(turn.trace_id, 16), turn.trace_id
        assert got[turn.id].trace_id == turn.trace_id and got[turn.id].source_turn_id == turn.source_turn_id
    assert player.trace_id == by_origin[resources_pb2.TURN_ORIGIN_PLAYER].trace_id, "the streamed turn names its trace too"
    assert (background.source_turn_id, by_origin[resources_pb2.TURN_ORIGIN_PLAYER].source_turn_id) == (player.id, "")
    assert background.trace_id != player.trace_id


async def test_a_detached_job_is_one_trace_rooted_in_its_background_turn_and_linked_to_its_source(traced):
    player, job, background = traced.player, traced.job, traced.background
    spans = traced.receiver.snapshot()
    in_job = [span for span in spans if span.trace_id == background.trace_id]
    [root] = [span for span in in_job if not span.parent_span_id]
    assert (root.service, root.name) == ("covel-scheduler", "covel.turn")
    assert root.attributes["covel.turn.origin"] == "background"
    assert (root.attributes["covel.turn_id"], root.attributes["covel.detached_job_id"]) == (background.id, job.id)
    assert root.attributes["covel.turn.status"] == "committed"
    assert [trace_id for trace_id, _ in root.links] == [player.trace_id]
    assert root.links[0][1] in {span.span_id for span in spans if span.trace_id == player.trace_id}
    assert sum(span.name == "covel.turn" for span in in_job) == 1
    # Each of the job's RPCs is in its trace: its snapshot (AcquireTurnLease), the runtime and the commit, which takes
    # the session's lease and ends the job in one call (CommitTurnRequest.job): no CompleteDetachedJob anywhere.
    names = {(span.service, span.name) for span in in_job}
    assert {
        ("covel-store", "/covel.store.v1.TransactionalStore/AcquireTurnLease"),
        ("covel-store", "/covel.store.v1.TransactionalStore/CommitTurn"),
        ("covel-scheduler", "covel.runtime"),
    } <= names, sorted(names)
    commits = {span.trace_id for span in spans if span.name == "/covel.store.v1.TransactionalStore/CommitTurn" and span.service == "covel-store"}
    assert commits == {player.trace_id, background.trace_id}
    assert not [span for span in spans if span.name.endswith("/CompleteDetachedJob")] and job.status == "succeeded"
    # While the turns ran, no trace of the scheduler started but a client's RPC or a background execution.
    while_serving = traced.served - traced.startup - traced.idle
    roots = {(span.service, span.name) for span in spans
             if not span.parent_span_id and span.service == "covel-scheduler" and span.trace_id in while_serving}
    assert {name for service, name in roots if not name.startswith("/covel.scheduler.v1.Scheduler/")} == {"covel.turn"}, roots


async def test_console_spans_go_to_stderr_and_the_logs_stay_json_lines(traced):
    group, turns = traced.group, traced.turns
    for service in SERVICES:
        log = (group.log_dir / f"{service}.log").read_text().splitlines()
        assert log and all(isinstance(json.loads(line), dict) for line in log), service
        assert not any('"span_id": "0x' in line for line in log), f"{service}.log holds console spans"
    printed = [json.loads(line) for line in (group.log_dir / "scheduler.stderr").read_text().splitlines() if line.startswith("{")]
    turn_spans = {span["attributes"].get("covel.turn_id") for span in printed if span["name"] == "covel.turn"}
    assert {turn.id for turn in turns} <= turn_spans
    # The README's recipe: follow one turn through every service's log.
    background = traced.background
    process = await asyncio.create_subprocess_exec(
        "jq", "-c", f'select(.turn_id=="{background.id}")', *(str(group.log_dir / f"{s}.log") for s in SERVICES),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert {json.loads(line)["service"] for line in out.decode().splitlines()} >= {"scheduler", "store"}
