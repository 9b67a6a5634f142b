"""The host's end of the sandbox's fork server (shared/sandbox/zygote.py): `Zygote` starts it once per
pool and asks it for workers; `ZygoteChild` is one forked worker as the pool sees it."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import json
import socket
import sys
from typing import Any

from shared.logs import get_logger
from shared.sandbox.channel import ChannelClosed, read_frame
from shared.sandbox.operations import operation_modules

log = get_logger(component="sandbox")


class ZygoteChild:
    """A worker forked by the zygote: the part of asyncio's Process a Worker uses (pid, kill, wait)."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.returncode: int | None = None
        self._exited = asyncio.get_running_loop().create_future()

    def kill(self) -> None:
        if self.returncode is None:
            self.zygote.kill(self.pid)

    def exited(self, code: int) -> None:
        self.returncode = code
        if not self._exited.done():
            self._exited.set_result(code)

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)


class Zygote:
    """The pool's fork server (shared/sandbox/zygote.py): started once, forks every worker."""

    def __init__(self, process: asyncio.subprocess.Process, requests: socket.socket, events: asyncio.StreamReader,
                 events_writer: asyncio.StreamWriter) -> None:
        self.process = process
        self._requests = requests
        self._events = events
        self._events_writer = events_writer
        self._ids = itertools.count(1)
        self._spawning: dict[int, asyncio.Future] = {}
        self._children: dict[int, ZygoteChild] = {}
        self.gone = False
        self._reading = asyncio.get_running_loop().create_task(self._read(), name="sandbox-zygote", context=contextvars.Context())

    @classmethod
    async def start(cls, env: dict[str, str]) -> Zygote:
        requests, requests_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        events, events_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "shared.sandbox.zygote", str(requests_child.fileno()), str(events_child.fileno()),
                json.dumps(operation_modules()),
                env=env, cwd="/", stdin=asyncio.subprocess.DEVNULL, pass_fds=(requests_child.fileno(), events_child.fileno()),
                start_new_session=True,
            )
        finally:
            requests_child.close()
            events_child.close()
        reader, writer = await asyncio.open_unix_connection(sock=events)
        return cls(process, requests, reader, writer)

    async def spawn(self, config: dict[str, Any], channel: socket.socket, timeout_s: float) -> ZygoteChild:
        spawn_id = next(self._ids)
        future = self._spawning[spawn_id] = asyncio.get_running_loop().create_future()
        try:
            socket.send_fds(self._requests, [json.dumps({"spawn": spawn_id, "config": config}).encode()], [channel.fileno()])
            return await asyncio.wait_for(future, timeout_s)
        finally:
            self._spawning.pop(spawn_id, None)

    def kill(self, pid: int) -> None:
        if not self.gone:
            with contextlib.suppress(OSError):
                self._requests.send(json.dumps({"kill": pid}).encode())

    async def _read(self) -> None:
        try:
            while True:
                event = await read_frame(self._events)
                if "spawned" in event:
                    child = self._children[int(event["pid"])] = ZygoteChild(self, int(event["pid"]))
                    future = self._spawning.get(int(event["spawned"]))
                    if future is not None and not future.done():
                        future.set_result(child)
                    else:
                        child.kill()
                elif "exited" in event:
                    exited = self._children.pop(int(event["exited"]), None)
                    if exited is not None:
                        exited.exited(int(event["code"]))
        except (ChannelClosed, KeyError, TypeError, ValueError) as error:
            log.warning("sandbox.zygote_gone", why=f"{type(error).__name__}: {error}")
        finally:
            # Its workers die with it (PR_SET_PDEATHSIG): their channels close, and the next spawn starts a new zygote.
            self.gone = True
            for future in self._spawning.values():
                if not future.done():
                    future.set_exception(RuntimeError("the sandbox's zygote exited"))
            for child in self._children.values():
                child.exited(-9)

    def close(self) -> None:
        self.gone = True
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self._requests.close()
        self._events_writer.close()
