"""The suite's fork servers (covel_cli/service_forks.py): a forked service is the service, run with the
environment, folder and output files it was given, and it is stopped and reports its exit as a process does."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from covel_cli.service_forks import ServiceForks
from shared.grpc_client import check_health
from shared.settings import REPO_ROOT
from tests.conftest import free_addr

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _serving(addr: str, stderr_path, since: int = 0, timeout_s: float = 60.0) -> None:
    """The gateway started after `since` (a length of its stderr file) says it is ready, and serves."""
    deadline = time.monotonic() + timeout_s
    while "COVEL_READY gateway" not in stderr_path.read_bytes()[since:].decode(errors="replace"):
        assert time.monotonic() < deadline, stderr_path.read_text()
        await asyncio.sleep(0.05)
    assert await check_health(addr, timeout_s=5.0) == "SERVING"


async def _spawn(forks: ServiceForks, tmp_path, env: dict[str, str]):
    with (tmp_path / "gateway.log").open("ab") as out, (tmp_path / "gateway.stderr").open("ab") as err:
        return await forks.spawn("gateway", env, tmp_path, out, err)


async def test_a_forked_gateway_serves_where_its_environment_says_and_stops_on_sigterm(tmp_path) -> None:
    forks = ServiceForks(REPO_ROOT)
    addr = free_addr()
    env = {**os.environ, "COVEL_GATEWAY_ADDR": addr, "COVEL_DATA_DIR": str(tmp_path), "COVEL_TLS_LISTEN_PLAINTEXT": "true"}
    process = await _spawn(forks, tmp_path, env)
    await _serving(addr, tmp_path / "gateway.stderr")
    assert process.returncode is None
    # Its own process, in the folder it was given; it serves on the address its environment names (its
    # /proc/<pid>/environ is the fork server's: the environment was set after the fork, in os.environ).
    assert os.readlink(f"/proc/{process.pid}/cwd") == str(tmp_path)
    process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(process.wait(), 60) == 0
    # Its JSON log went to the file it was given.
    assert "service.listening" in (tmp_path / "gateway.log").read_text()

    since = (tmp_path / "gateway.stderr").stat().st_size
    again = await _spawn(forks, tmp_path, env)
    await _serving(addr, tmp_path / "gateway.stderr", since)
    again.kill()
    assert await asyncio.wait_for(again.wait(), 60) == -signal.SIGKILL
    assert again.returncode == -signal.SIGKILL


async def test_a_service_that_cannot_start_exits_with_its_code(tmp_path) -> None:
    forks = ServiceForks(REPO_ROOT)
    env = {**os.environ, "COVEL_GATEWAY_ADDR": "not an address", "COVEL_DATA_DIR": str(tmp_path)}
    process = await _spawn(forks, tmp_path, env)
    code = await asyncio.wait_for(process.wait(), 60)
    assert code != 0
    assert (tmp_path / "gateway.stderr").read_text().strip(), "its error went to its own stderr file"
