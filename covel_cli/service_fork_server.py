"""`python -m covel_cli.service_fork_server <service> <requests fd>`: starts one service's processes by fork.

The test suite starts a group of five services about a hundred times; each service's start is mostly its
imports (about 1 s of CPU each, 5 of a group's 9). A fork server has imported one service's modules once
(`services.<service>.__main__`, whose `if __name__` guard keeps it from running); each process of that
service is then a fork of it that runs the service's `__main__` as `python -m services.<service>` would,
with the environment, working directory and output files of the request. One server per service, so
that a service's process holds only its own modules (its metrics registry, for one). Used by the tests'
`ServiceGroup`s (covel_cli/service_forks.py); `covel up` starts services as plain processes.

Requests (SOCK_SEQPACKET, one JSON object each, answered in order):
- {"spawn": {"env": {...}, "cwd": "..."}} with stdout and stderr attached as descriptors -> {"pid": n};
- {"status": pid} -> {"code": n | null}: the exit code (negative: the signal) once the child exited.
The server dies with its client (PR_SET_PDEATHSIG), and its children with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import runpy
import select
import signal
import socket
import sys

PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _child(service: str, request: dict, fds: list[int], closing: list[int]) -> None:
    """In the fork: the service's process, as `python -m services.<service>` with the request's environment."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _die_with_parent()
        null = os.open(os.devnull, os.O_RDONLY)
        for target, fd in ((0, null), (1, fds[0]), (2, fds[1])):
            os.dup2(fd, target)
        for fd in (null, *fds, *closing):
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [f"-m services.{service}"]
        runpy.run_module(f"services.{service}", run_name="__main__", alter_sys=True)
    except SystemExit as exiting:
        code = exiting.code
        _exit(code if isinstance(code, int) else (0 if code is None else 1))
    except BaseException:
        import traceback

        traceback.print_exc()
        _exit(1)
    _exit(0)


def _exit(code: int) -> None:
    """End the forked service as the interpreter would (its atexit functions: exporters flush), never returning to the
    server's loop."""
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream: nothing left to say
                stream.flush()
        os._exit(code)


def _reap(codes: dict[int, int | None]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        codes[pid] = os.waitstatus_to_exitcode(status)


def serve(service: str, requests: socket.socket) -> None:
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    codes: dict[int, int | None] = {}
    while True:
        ready, _, _ = select.select([requests.fileno(), wakeup_read], [], [])
        if wakeup_read in ready:
            os.read(wakeup_read, 4096)
        _reap(codes)
        if requests.fileno() not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(requests, 1 << 22, 2)
        if not message:
            os._exit(0)  # the client is gone
        request = json.loads(message)
        if "status" in request:
            _reap(codes)
            requests.send(json.dumps({"code": codes.get(int(request["status"]))}).encode())
            continue
        pid = os.fork()
        if pid == 0:
            _child(service, request["spawn"], fds, [requests.fileno(), wakeup_read, wakeup_write])
        for fd in fds:
            os.close(fd)
        codes[pid] = None
        requests.send(json.dumps({"pid": pid}).encode())


def main() -> None:
    service, requests = sys.argv[1], socket.socket(fileno=int(sys.argv[2]))
    _die_with_parent()
    # The service's modules, imported once: every fork starts with them.
    __import__(f"services.{service}.__main__")
    requests.send(b'{"ready": true}')
    serve(service, requests)


if __name__ == "__main__":
    main()
