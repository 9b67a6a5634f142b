"""Service processes forked from per-service fork servers (covel_cli/service_fork_server.py), for the test suite.

`enable()` (tests/conftest.py) makes every `ServiceGroup` of this process start its services this way: a
service's start then costs a fork instead of a Python start and its imports (about 5 s of CPU a group of
five). The processes are the same code run the same way (`services.<name>.__main__` with the group's
environment, working directory and output files); only their parent differs, so a `ForkedProcess` stands in
for asyncio's Process where `ServiceGroup` and the tests use one: pid, returncode, wait, send_signal,
terminate, kill. `covel up` and `covel demo` start plain processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import BinaryIO

# How long a fork server may take to import its service, and a spawn or status answer to come.
START_TIMEOUT_S = 120.0
ANSWER_TIMEOUT_S = 30.0
# How often `wait` asks whether the process has exited.
WAIT_POLL_S = 0.02


class ForkServer:
    """One service's fork server, started on first use and kept for the rest of this process."""

    def __init__(self, service: str, repo_root: Path) -> None:
        self.service = service
        requests, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lock = threading.Lock()
        with theirs:
            self.process = subprocess.Popen(  # this interpreter, a module of ours
                [sys.executable, "-m", "covel_cli.service_fork_server", service, str(theirs.fileno())],
                cwd=repo_root, stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
            )
        self._requests = requests
        self._requests.settimeout(START_TIMEOUT_S)
        if not self._requests.recv(64):
            raise RuntimeError(f"the fork server of {service} exited while importing it")
        self._requests.settimeout(ANSWER_TIMEOUT_S)

    def _ask(self, request: dict, fds: tuple[int, ...] = ()) -> dict:
        with self._lock:
            socket.send_fds(self._requests, [json.dumps(request).encode()], list(fds))
            answer = self._requests.recv(1 << 16)
        if not answer:
            raise RuntimeError(f"the fork server of {self.service} is gone")
        return json.loads(answer)

    def spawn(self, env: dict[str, str], cwd: Path, stdout: BinaryIO, stderr: BinaryIO) -> ForkedProcess:
        answer = self._ask({"spawn": {"env": env, "cwd": str(cwd)}}, (stdout.fileno(), stderr.fileno()))
        return ForkedProcess(self, int(answer["pid"]))

    def exit_code(self, pid: int) -> int | None:
        return self._ask({"status": pid})["code"]


class ForkedProcess:
    """A service process forked by its fork server: the part of asyncio's Process a ServiceGroup uses."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self._server = server
        self.pid = pid
        self._code: int | None = None

    @property
    def returncode(self) -> int | None:
        if self._code is None:
            self._code = self._server.exit_code(self.pid)
        return self._code

    async def wait(self) -> int:
        # Not our child: its fork server reaps it and says so when asked.
        while (code := self.returncode) is None:  # noqa: ASYNC110
            await asyncio.sleep(WAIT_POLL_S)
        return code

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ServiceForks:
    """The fork servers of this process, one per service, started when a group first needs that service."""

    def __init__(self, repo_root: Path) -> None:
        self._repo_root = repo_root
        self._servers: dict[str, ForkServer] = {}
        self._lock = threading.Lock()

    def server(self, service: str) -> ForkServer:
        with self._lock:
            server = self._servers.get(service)
            if server is None or server.process.poll() is not None:
                server = self._servers[service] = ForkServer(service, self._repo_root)
            return server

    async def spawn(self, service: str, env: dict[str, str], cwd: Path, stdout: BinaryIO, stderr: BinaryIO) -> ForkedProcess:
        # The first use of a service imports it in its server (a second or so): off the event loop.
        server = await asyncio.to_thread(self.server, service)
        return server.spawn(env, cwd, stdout, stderr)


_ENABLED: ServiceForks | None = None


def enable(repo_root: Path) -> None:
    """Every ServiceGroup made in this process from now on forks its services (the test suite)."""
    global _ENABLED
    if _ENABLED is None:
        _ENABLED = ServiceForks(repo_root)


def enabled() -> ServiceForks | None:
    return _ENABLED
