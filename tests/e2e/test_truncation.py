"""Cut-off replies: a story keeps its text with a notice; other runtimes retry once, then fail."""

from __future__ import annotations

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from shared.structs import from_struct
from tests.e2e.conftest import minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
SCRIPT = {
    "queues": {
        "story": [{"text": "The rain falls and", "finish_reason": "length"}],
        "plugin": [
            {"text": "cut", "finish_reason": "length"}, {"text": "A fine summary."},
            {"text": "cut", "finish_reason": "length"}, {"text": "cut again", "finish_reason": "length"},
        ],
    }
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def scripted_services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("truncation"), script=SCRIPT) as group:
        yield group


async def test_truncated_story_is_kept_and_other_runtimes_retry_once(scripted_services) -> None:
    async with open_channel(scripted_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=["summary-probe"], approved_plugins=["summary-probe"]))).session

        async def turn(text: str) -> store_pb2.Turn:
            request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text=text)])
            return [event async for event in stub.SubmitActions(request)][-1].turn_completed

        first = await turn("I walk into the rain.")
        results = {r.runtime_id: r for r in first.runtime_results}
        assert first.status == store_pb2.TURN_STATUS_COMMITTED
        assert first.narrative == "The rain falls and"
        assert results["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS and "mid-sentence" in results["narrator"].reason
        assert results["summary-probe"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
        assert from_struct(results["summary-probe"].output) == {"content": "A fine summary."}

        second = await turn("I keep walking.")
        summary = next(r for r in second.runtime_results if r.runtime_id == "summary-probe")
        assert summary.status == resources_pb2.RUNTIME_STATUS_FAILED and summary.reason.startswith("truncated: the reply hit the model's output limit twice")
        assert second.status == store_pb2.TURN_STATUS_COMMITTED, "a failed side runtime does not stop the story"
