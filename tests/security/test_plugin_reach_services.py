"""What a sandboxed function handler reaches, through the five real services as they ship: no network
of its own (urllib, a raw socket to the database port), ctx.http only to declared origins and, for a
local server, only because the operator allows its origin; stdout and stderr that are not the service's
log; a /tmp of its own; and log lines in the scheduler's log marked with the plugin, session and turn,
rate-limited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct
from tests.conftest import SHIPPED_SANDBOX
from tests.e2e.conftest import minimal_session, running_services
from tests.security.http_site import Site

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "egress-probe"
# The origins the fixture plugin names (tests/fixtures/plugins/egress-probe): only the first is declared.
DECLARED_PORT, UNDECLARED_PORT = 47613, 47614


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def reach(tmp_path_factory):
    declared, undeclared = Site(DECLARED_PORT), Site(UNDECLARED_PORT)
    env = {**SHIPPED_SANDBOX, "COVEL_SANDBOX_HTTP_ALLOW_PRIVATE_ORIGINS": declared.origin}
    try:
        async with running_services(tmp_path_factory.mktemp("covel-reach"), observable_sandbox=False, extra_env=env) as group:
            yield group, declared, undeclared
    finally:
        declared.close()
        undeclared.close()


async def test_a_handler_reaches_declared_origins_through_the_host_and_nothing_else(reach) -> None:
    group, declared, undeclared = reach
    async with open_channel(group.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session.id
        request = scheduler_pb2.SubmitActionsRequest(session_id=session, actions=[resources_pb2.PlayerAction(kind="do", text="I look.")])
        events = [event async for event in stub.SubmitActions(request)]
    turn = events[-1].turn_completed
    result = next(r for r in turn.runtime_results if r.runtime_id == f"{PROBE}/reach")
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    seen = from_struct(result.output)
    assert seen["urllib"] == "URLError", "no network of its own: urllib reaches nothing"
    assert seen["database"] in ("ConnectionRefusedError", "OSError"), "no socket to the database"
    assert seen["declared"] == "200 /declared", "a declared origin the operator allows works, sent by the host"
    assert seen["undeclared"] == (f"HttpPermissionDenied: http permission denied: GET {undeclared.origin} "
                                  f"is not declared in permissions.http of {PROBE}")
    assert undeclared.seen == [] and ("GET", "/by-urllib") not in declared.seen
    assert seen["stdio"] == {"1": "/dev/null", "2": "/dev/null"}, "not the service's log file"
    assert not Path(seen["marker"]).exists(), "the handler's /tmp is its own"

    lines = [json.loads(line) for line in (group.log_dir / "scheduler.log").read_text().splitlines() if line.startswith("{")]
    mine = [line for line in lines if line.get("plugin_id") == PROBE and str(line.get("event", "")).startswith("plugin.log")]
    flood = [line for line in mine if line["event"] == "plugin.log" and line.get("message") == "flood"]
    # The burst (200), and what the rate (50 a second) refilled while the 300 lines came in.
    assert 200 <= len(flood) < 260, len(flood)
    assert all(line["session_id"] == session and line.get("turn_id") == turn.id for line in flood), flood[0]
    assert [line for line in mine if line["event"] == "plugin.log_dropped"], "the excess is dropped, with one notice"
    assert not [line for line in lines if line.get("event") == "service.security" and line.get("plugin_id")]
