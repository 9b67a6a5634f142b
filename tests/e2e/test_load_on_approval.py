"""A community plugin's code runs only once a session approved it, through the five real services
(tests/fixtures/approval-load/load-probe: register(covel) and its TurnStart hook each leave a mark in the
data dir). Not at start, not for a session that does not approve it; approving loads it, its hook runs in
the approving session's next turn, and a session that has not approved it still does not get it. Then
`covel validate-plugin` runs none of its code, and `--probe` does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from tests.e2e.conftest import OBSERVABLE_SANDBOX, minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "load-probe"
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "approval-load" / PROBE


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def community(tmp_path_factory):
    data = tmp_path_factory.mktemp("load-on-approval")
    plugins = data / "community"
    shutil.copytree(FIXTURE, plugins / PROBE)
    async with running_services(data, plugin_dirs=(plugins,)) as group:
        yield group


def loads(data_dir: Path) -> int:
    path = data_dir / "load-probe.loads"
    return len(path.read_text().splitlines()) if path.exists() else 0


def hooked_sessions(data_dir: Path) -> list[str]:
    path = data_dir / "load-probe.jsonl"
    return [json.loads(line)["session"] for line in path.read_text().splitlines()] if path.exists() else []


async def play(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str) -> None:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text="I wait.")])
    turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn


async def test_the_code_runs_only_once_a_session_approved_it(community) -> None:
    data = community.data_dir
    assert loads(data) == 0
    async with open_channel(community.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        unapproved = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE]))).session
        await play(stub, unapproved.id)
        assert loads(data) == 0 and hooked_sessions(data) == []

        approving = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE]))).session
        await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=approving.id, approve=[PROBE]))
        assert loads(data) == 1
        await play(stub, approving.id)
        assert hooked_sessions(data) == [approving.id]

        # The session that did not approve it still does not get its hook; the plugin is not loaded again.
        await play(stub, unapproved.id)
        assert hooked_sessions(data) == [approving.id]

        # A session created approving it reuses the loaded plugin.
        created = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        await play(stub, created.id)
        assert loads(data) == 1 and hooked_sessions(data) == [approving.id, created.id]


def validate(package: Path, data_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **OBSERVABLE_SANDBOX, "COVEL_DATA_DIR": str(data_dir)}
    return subprocess.run([sys.executable, "-m", "covel_cli.main", "validate-plugin", *flags, str(package)],
                          capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=60)


async def test_validate_plugin_runs_the_code_only_with_probe(tmp_path: Path) -> None:
    package = tmp_path / "plugins" / PROBE
    shutil.copytree(FIXTURE, package)
    static = validate(package, tmp_path)
    assert static.returncode == 0, static.stdout + static.stderr
    # The probe's process sees no COVEL_DATA_DIR: the probe writes next to its package.
    assert loads(tmp_path) == 0 and loads(package.parent) == 0
    probed = validate(package, tmp_path, "--probe")
    assert probed.returncode == 0, probed.stdout + probed.stderr
    assert loads(tmp_path) + loads(package.parent) == 1
