"""A `covel` command run with certificates that do not fit the running services (another data dir, or none)
says so in one line, with what to do, and prints none of gRPC's own handshake lines (covel_cli/refusals.py)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from covel_cli.launcher import dev_pki
from shared.settings import REPO_ROOT

pytestmark = pytest.mark.asyncio(loop_scope="session")
SHARED_SERVICES = True


async def covel(services, data_dir: Path, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "COVEL_DATA_DIR": str(data_dir), **{f"COVEL_{name.upper()}_ADDR": addr for name, addr in services.addrs.items()}}
    env.pop("GRPC_VERBOSITY", None)
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "covel_cli.main", *args, cwd=REPO_ROOT, env=env,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()


async def test_another_data_dirs_certificates_are_named_in_one_line(services, tmp_path) -> None:
    other = tmp_path / "other"
    dev_pki(other).ensure()
    code, _, err = await covel(services, other, "hooks", "info")
    assert code == 1
    hooks = services.addrs["hooks"]
    assert err == (f"covel hooks info: the hooks service at {hooks} refused this command's TLS connection (the certificates of "
                   f"the data dir {other} (its pki/)): run the command with the data dir of the `covel up` that started it "
                   "(COVEL_DATA_DIR), or with that stack's COVEL_TLS_* settings\n"), err


async def test_no_certificate_at_all_is_named_too(services, tmp_path) -> None:
    code, out, err = await covel(services, tmp_path, "health")
    assert code == 1
    assert [line.split()[-1] for line in out.splitlines()] == ["UNREACHABLE"] * 4 + ["SERVING"], out
    [line] = err.splitlines()
    assert line.startswith(f"covel health: the store service at {services.addrs['store']} refused this command's TLS connection "
                           f"(no certificate: the data dir {tmp_path} has none)"), err


async def test_the_stacks_own_data_dir_works(services) -> None:
    code, out, err = await covel(services, services.data_dir, "hooks", "info")
    assert code == 0 and "Contract events:" in out and err == "", err
