"""A throwaway PostgreSQL cluster for tests that must restart or kill the database.

The machine's shared server is never touched: `initdb` makes a cluster in a temporary folder,
served on a free loopback port by a non-root user (PostgreSQL refuses to run as root; as root
the cluster runs as the `postgres` account). Stopped and deleted on exit.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import free_addr


def postgres_bin_dir() -> Path | None:
    """The newest installed server binaries (Debian's /usr/lib/postgresql/<version>/bin), else PATH's."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _run_as() -> list[str]:
    """How to run a server command as a non-root user."""
    if os.geteuid() != 0:
        return []
    return ["runuser", "-u", "postgres", "--"]


def why_unavailable() -> str | None:
    if postgres_bin_dir() is None:
        return "no PostgreSQL server binaries (initdb) on this machine"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a `postgres` account to run a throwaway cluster as"
        if shutil.which("runuser") is None:
            return "running as root without runuser"
    return None


@dataclass
class ThrowawayCluster:
    data_dir: Path
    port: int
    bin_dir: Path

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def pg_ctl(self, *args: str) -> list[str]:
        return [*_run_as(), str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), *args]

    def restart_command(self) -> list[str]:
        return self.pg_ctl("restart", "-w", "-m", "fast", "-o", self._options())

    def _options(self) -> str:
        return f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 -c fsync=off"


@contextlib.contextmanager
def throwaway_cluster() -> Iterator[ThrowawayCluster]:
    bin_dir = postgres_bin_dir()
    assert bin_dir is not None, why_unavailable()
    parent = Path(tempfile.mkdtemp(prefix="covel-pg-"))
    data_dir = parent / "data"
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(parent, account.pw_uid, account.pw_gid)
    os.chmod(parent, 0o755)
    cluster = ThrowawayCluster(data_dir, int(free_addr().rsplit(":", 1)[1]), bin_dir)
    try:
        subprocess.run([*_run_as(), str(bin_dir / "initdb"), "-D", str(data_dir), "-A", "trust", "-U", "postgres", "--no-sync"],
                       check=True, capture_output=True)
        subprocess.run(cluster.pg_ctl("start", "-w", "-l", str(data_dir / "server.log"), "-o", cluster._options()),
                       check=True, capture_output=True)
        yield cluster
    finally:
        subprocess.run(cluster.pg_ctl("stop", "-m", "immediate"), capture_output=True)
        shutil.rmtree(parent, ignore_errors=True)
