"""ctx.progress through the real services: reports reach the client's stream in order."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_progress_reports_stream_dedupe_and_close_with_the_runtime(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["progress-probe"], approved_plugins=["progress-probe"]))).session
        events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I wait.")]))]
    reports = [(e.progress.runtime_id.split("/")[-1], e.progress.job_id, e.progress.seq, e.progress.status, e.progress.label)
               for e in events if e.WhichOneof("event") == "progress"]
    assert reports == [
        ("work", "index", 1, resources_pb2.PROGRESS_STATUS_RUNNING, "Indexing"),
        ("work", "index", 2, resources_pb2.PROGRESS_STATUS_RUNNING, "Indexing"),
        ("work", "index", 3, resources_pb2.PROGRESS_STATUS_SUCCEEDED, "Indexing"),
        ("work", "open", 1, resources_pb2.PROGRESS_STATUS_RUNNING, "Left open"),
        # The nested call has its own job key: the same job id does not clash with its parent's.
        ("step", "index", 1, resources_pb2.PROGRESS_STATUS_RUNNING, "Nested"),
        # Jobs still open when the runtime ends finish with it.
        ("work", "open", 2, resources_pb2.PROGRESS_STATUS_SUCCEEDED, "Left open"),
        ("step", "index", 2, resources_pb2.PROGRESS_STATUS_SUCCEEDED, "Nested"),
    ]
