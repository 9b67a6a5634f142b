"""A service whose address another process holds says so and exits at once (EXIT_ADDRESS_IN_USE), instead of
hanging not serving until its supervisor gives up (it did: what it started before the bind kept it alive)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time

import pytest

from shared.grpc_server import EXIT_ADDRESS_IN_USE
from shared.settings import REPO_ROOT


@pytest.mark.parametrize("service", ["scheduler", "store"])
async def test_a_taken_address_is_a_prompt_exit_with_the_reason(service: str, tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, f"COVEL_{service.upper()}_ADDR": f"127.0.0.1:{port}", "COVEL_DATA_DIR": str(tmp_path)}
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(sys.executable, "-m", f"services.{service}", cwd=REPO_ROOT, env=env,
                                                       stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == EXIT_ADDRESS_IN_USE
    assert f"could not bind 127.0.0.1:{port}: the address is in use" in stderr.decode()
    assert time.monotonic() - started < 20
