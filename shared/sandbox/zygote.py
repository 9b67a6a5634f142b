"""`python -m shared.sandbox.zygote <requests fd> <events fd> <operation modules>`: starts sandbox workers by fork.

A service's pool starts one zygote (with a worker's scrubbed environment) that has imported what
a worker needs once (the sandbox's modules, and the operation modules its service registered, a
JSON list: shared/sandbox/operations.py); each worker is then a fork of it, a few milliseconds
instead of a Python start and its imports (about 0.3 s of CPU), so a service loading many plugins starts quickly and
a worker replaced after a timeout is back at once. The zygote runs no plugin code: a forked child
isolates itself (shared/sandbox/isolation.py) before it loads any.

Requests (SOCK_SEQPACKET, one JSON object each): {spawn: id, config} with the worker's channel
descriptor attached, {kill: pid}. Events (a stream of channel frames): {spawned: id, pid},
{exited: pid, code} (negative: the signal). The zygote and its workers die with the service.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys

from shared.sandbox import isolation
from shared.sandbox.channel import encode

# Preloaded so that a fork needs no import of its own: the worker and what it runs plugin code with.
from shared.sandbox import function_context, worker  # noqa: F401  # isort: skip
from shared.sandbox.operations import load_operations  # isort: skip

PR_SET_PDEATHSIG = 1


def _child(config: dict, channel_fd: int, requests: socket.socket, events: socket.socket, wakeup: int) -> None:
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for closing in (requests, events):
        closing.close()
    os.close(wakeup)
    # The worker dies with the zygote (and so with the service).
    isolation._libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    config["channel_fd"] = channel_fd
    try:
        worker.run(config)
    finally:
        os._exit(70)


def _reap(children: set[int], events: socket.socket) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        events.sendall(encode({"exited": pid, "code": os.waitstatus_to_exitcode(status)}))


def _handle(message: bytes, fds: list[int], children: set[int], requests: socket.socket, events: socket.socket,
            wakeup: int) -> None:
    request = json.loads(message)
    if "kill" in request:
        pid = int(request["kill"])
        if pid in children:  # not reaped yet: the pid is still this child's
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        return
    pid = os.fork()
    if pid == 0:
        _child(request["config"], fds[0], requests, events, wakeup)
    os.close(fds[0])
    children.add(pid)
    events.sendall(encode({"spawned": request["spawn"], "pid": pid}))


def main() -> None:
    requests = socket.socket(fileno=int(sys.argv[1]))
    events = socket.socket(fileno=int(sys.argv[2]))
    load_operations(json.loads(sys.argv[3]) if len(sys.argv) > 3 else ())
    isolation._libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: set[int] = set()
    while True:
        ready, _, _ = select.select([requests.fileno(), wakeup_read], [], [])
        if wakeup_read in ready:
            os.read(wakeup_read, 4096)
            _reap(children, events)
        if requests.fileno() in ready:
            message, fds, _, _ = socket.recv_fds(requests, 1 << 20, 1)
            if not message:
                os._exit(0)  # the service is gone
            _handle(message, fds, children, requests, events, wakeup_read)


if __name__ == "__main__":
    main()
