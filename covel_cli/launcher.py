"""Start the five services as processes and supervise them (`covel up`, `covel demo`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import grpc
import httpx

from covel_cli import service_forks
from covel_cli.service_forks import ForkedProcess, ServiceForks
from shared.grpc_client import check_health, open_channel
from shared.security.service_identity import DevPki
from shared.settings import CONFIG_FILE_VARIABLE, PeerAddresses, SecuritySettings, config_file

# Start order: hooks loads entry modules from the registry's catalogue; the scheduler comes last.
SERVICES = ("store", "registry", "gateway", "hooks", "scheduler")
# The web front (services/web): an HTTP server in front of the scheduler, not a gRPC service.
WEB = "web"
# `covel up` starts a service that exits again, up to this many times in this window.
RESTARTS = 3
RESTART_WINDOW_S = 60.0


class FreePorts(dict[str, str]):
    """Loopback addresses picked by `free_port_addrs`: a group may pick them anew when one turns out taken."""


def free_port_addrs() -> FreePorts:
    """A free loopback port per service. Free when probed only: another process may take one before the
    service binds it. Servers bind without SO_REUSEPORT (shared/grpc_server.py), so that fails the
    service's start loudly, and `ServiceGroup.start` retries with new ports instead of sharing one."""
    addrs = FreePorts()
    for name in SERVICES:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            addrs[name] = f"127.0.0.1:{probe.getsockname()[1]}"
    return addrs


def own_metrics_port(env: dict[str, str], name: str) -> dict[str, str]:
    """Five services and the web front on one host cannot share COVEL_METRICS_PORT: each gets that port plus its
    place (store +0, registry +1, gateway +2, hooks +3, scheduler +4, web +5), unless its own
    COVEL_<NAME>_METRICS_PORT is set."""
    own, shared = f"COVEL_{name.upper()}_METRICS_PORT", env.get("COVEL_METRICS_PORT", "").strip()
    if env.get(own) or not shared.isdigit():
        return {}
    return {own: str(int(shared) + (*SERVICES, WEB).index(name))}


def configured_addrs() -> dict[str, str]:
    peers = PeerAddresses()
    return {name: peers.addr_of(name) for name in SERVICES}


class ServiceFailed(RuntimeError):
    pass


class PortTaken(ServiceFailed):
    """A service exited because its address was in use (shared.grpc_server.AddressInUse)."""


# What a service prints once it serves (shared.grpc_server.serve_until_signalled), and what it logs
# when its port is taken.
READY_LINE = "COVEL_READY {name} "
BIND_FAILED = "could not bind"
# A service's two streams, each to a file of its own: stdout is its JSON log, stderr the rest
# (the READY line, console trace spans, a crash's traceback).
OUTPUTS = {"stdout": "{name}.log", "stderr": "{name}.stderr"}
# The services run as `python -m services.<name>` from here.
REPO_ROOT = Path(__file__).resolve().parent.parent


def dev_pki(data_dir: Path) -> DevPki:
    """The CA and per-service certificates `covel up` keeps in its data dir (docs/security.md, Service identity)."""
    return DevPki(data_dir / "pki")


def client_security(name: str, data_dir: Path, security: SecuritySettings | None = None) -> SecuritySettings:
    """How this process reaches service `name` of a group started in `data_dir`: with COVEL_TLS_* set
    (`security`, default the environment), as they say; else the scheduler as it listens (plaintext)
    and the others as the dev PKI's operator, when `covel up` made one there."""
    security = security if security is not None else SecuritySettings()
    if security.tls_cert_file is not None or security.tls_ca_file is not None or name == "scheduler":
        return security
    operator = dev_pki(data_dir).files("operator")
    return operator.security() if operator.cert.exists() else security


@dataclass
class ServiceGroup:
    addrs: dict[str, str]
    data_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: dict[str, asyncio.subprocess.Process | ForkedProcess] = field(default_factory=dict)
    # The scheduler's client API over TLS (its certificate; no client certificate asked), as in a
    # cluster. Off: it listens in plaintext on its loopback address, as `covel play` expects.
    scheduler_tls: bool = False
    # Where the web front (the player page and the HTTP/JSON API, services/web) listens; None: no web front.
    # It is a public client of the scheduler, started after it and stopped first.
    web_addr: str | None = None
    # Services forked from fork servers that imported them once (the test suite: covel_cli/service_forks.py); None:
    # each is a `python -m services.<name>` of its own, as `covel up` starts them.
    forks: ServiceForks | None = field(default_factory=service_forks.enabled)
    # Where each service's output files stood when it was started: its READY line comes after.
    _log_offsets: dict[Path, int] = field(default_factory=dict)

    @property
    def web_url(self) -> str:
        return f"http://{self.web_addr}/" if self.web_addr else ""

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def pki(self) -> DevPki:
        return dev_pki(self.data_dir)

    def env(self, name: str | None = None) -> dict[str, str]:
        """The environment of service `name`: its own certificate (each process holds only its own
        key); without a name, the group's settings but no certificate."""
        env = dict(os.environ)
        # Services run from the repository: the config file is the one of this process's working directory.
        env[CONFIG_FILE_VARIABLE] = str(config_file().resolve())
        for service, addr in self.addrs.items():
            env[f"COVEL_{service.upper()}_ADDR"] = addr
        env["COVEL_DATA_DIR"] = str(self.data_dir)
        if name is not None:
            env.update(self.pki.files(name).env())
            if name == "scheduler":
                env.update({"COVEL_TLS_REQUIRE_CLIENT_CERT": "false"} if self.scheduler_tls else {"COVEL_TLS_LISTEN_PLAINTEXT": "true"})
        env.update(self.extra_env)
        if name in SERVICES:
            env.update(own_metrics_port(env, name))
        return env

    def security(self, name: str | None = None) -> SecuritySettings:
        """How this process reaches service `name`: the scheduler as its public clients do (its CA,
        no certificate, when it serves TLS), the internal services (no name: any) as the operator."""
        if name == "scheduler":
            return SecuritySettings(tls_ca_file=self.pki.ca_cert) if self.scheduler_tls else SecuritySettings()
        return self.pki.files("operator").security()

    def security_as(self, identity: str) -> SecuritySettings:
        """Settings that present `identity`'s certificate (a service, or operator) of the group's PKI."""
        return self.pki.files(identity).security()

    def channel_as(self, name: str, identity: str) -> grpc.aio.Channel:
        """A channel to service `name` that presents `identity`'s certificate (as that service, or the operator, would call)."""
        return open_channel(self.addrs[name], security=self.security_as(identity))

    async def start(self, ready_timeout_s: float = 60.0, *, bind_attempts: int = 3) -> None:
        """Start every service and wait until all serve. With ports from `free_port_addrs`, a port
        another process took meanwhile stops the group and starts it again on new ports."""
        for attempt in range(1, bind_attempts + 1):
            try:
                await self._start_once(ready_timeout_s)
                return
            except PortTaken:
                if not isinstance(self.addrs, FreePorts) or attempt == bind_attempts:
                    raise
                await self.stop(grace_s=5.0)
                self.processes.clear()
                self.addrs = free_port_addrs()

    async def _start_once(self, ready_timeout_s: float) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # Blocking file work, once per start (creating keys the first time takes milliseconds).
        self.pki.ensure()
        deadline = time.monotonic() + ready_timeout_s
        # The scheduler once its peers serve: its channels connect at once instead of starting in
        # reconnect backoff, which failed the first calls with UNAVAILABLE.
        for phase in (tuple(name for name in SERVICES if name != "scheduler"), ("scheduler",)):
            for name in phase:
                await self._spawn(name)
            await self.wait_serving(max(1.0, deadline - time.monotonic()), phase)
        if self.web_addr:
            await self._spawn(WEB, self.web_env())
            await self.wait_serving(max(1.0, deadline - time.monotonic()), (WEB,))

    def web_env(self) -> dict[str, str]:
        """The web front's environment: the group's settings, no certificate (it calls the scheduler as its clients do)."""
        env = {**self.env(), "COVEL_WEB_ADDR": self.web_addr or ""}
        env.update(own_metrics_port(env, WEB))
        if self.scheduler_tls:
            env["COVEL_TLS_CA_FILE"] = str(self.pki.ca_cert)
        return env

    async def _serving(self, name: str, security: SecuritySettings | None) -> bool:
        """The gRPC health service says SERVING; the web front answers /readyz (the scheduler behind it serves)."""
        if name != WEB:
            return await check_health(self.addrs[name], timeout_s=1.0, security=security) == "SERVING"
        with contextlib.suppress(httpx.HTTPError):
            async with httpx.AsyncClient(timeout=1.0) as client:
                return (await client.get(f"{self.web_url}readyz")).status_code == 200
        return False

    async def _spawn(self, name: str, env: dict[str, str] | None = None) -> None:
        # The child keeps its own copies of the descriptors; ours close once it is started.
        with contextlib.ExitStack() as outputs:
            stdout, stderr = self._open_outputs(name, outputs)
            if self.forks is not None:
                self.processes[name] = await self.forks.spawn(name, env if env is not None else self.env(name), REPO_ROOT,
                                                              stdout, stderr)
                return
            self.processes[name] = await asyncio.create_subprocess_exec(
                sys.executable, "-m", f"services.{name}", env=env if env is not None else self.env(name), cwd=REPO_ROOT,
                stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=stderr,
            )

    def _open_outputs(self, name: str, outputs: contextlib.ExitStack) -> tuple[BinaryIO, BinaryIO]:
        """`name`'s stdout and stderr files, opened for appending; where each ends now is where its new output starts.
        Local files opened once per start: blocking the loop for that is negligible."""
        files = {}
        for stream, path in self.output_paths(name).items():
            self._log_offsets[path] = path.stat().st_size if path.exists() else 0
            files[stream] = outputs.enter_context(path.open("ab"))
        return files["stdout"], files["stderr"]

    def output_paths(self, name: str) -> dict[str, Path]:
        """Where `name`'s stdout (its JSON log) and stderr go."""
        return {stream: self.log_dir / pattern.format(name=name) for stream, pattern in OUTPUTS.items()}

    async def wait_serving(self, timeout_s: float, names: tuple[str, ...] = SERVICES) -> None:
        deadline = time.monotonic() + timeout_s
        pending = set(names)
        security = {name: self.security(name) if name != WEB else None for name in names}
        while pending:
            for name in list(pending):
                process = self.processes[name]
                if process.returncode is not None:
                    failure = PortTaken if BIND_FAILED in self._log_since_start(name) else ServiceFailed
                    why = self.last_problem(name)
                    who = "the web front" if name == WEB else f"service {name}"
                    raise failure(f"{who} exited with code {process.returncode} while starting"
                                  f"{f' ({why})' if why else ''}; its log: {self.log_dir / (name + '.log')}")
                # Its own READY line, not just a healthy port: a server of another process on a
                # port this group picked must not pass for this group's service.
                if READY_LINE.format(name=name) not in self._log_since_start(name):
                    continue
                if await self._serving(name, security[name]):
                    pending.discard(name)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise ServiceFailed(f"not serving after {timeout_s:.0f} s: {', '.join(sorted(pending))} (logs in {self.log_dir})")
            await asyncio.sleep(0.1)

    def _log_since_start(self, name: str) -> str:
        """Both output files of `name` since it was started."""
        text = []
        for path in self.output_paths(name).values():
            if path.exists():
                with path.open("rb") as output:
                    output.seek(self._log_offsets.get(path, 0))
                    text.append(output.read().decode(errors="replace"))
        return "\n".join(text)

    def log_tail(self, name: str, lines: int = 20) -> str:
        """The last `lines` of `name`'s log, then of its stderr (where a crash's traceback is)."""
        tails = []
        for path in self.output_paths(name).values():
            if path.exists():
                tails.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(tails)

    def last_problem(self, name: str) -> str:
        """One line on why `name` stopped, from the end of its log: the last error entry's event and
        message, or a traceback's last line; "" when the log says nothing useful."""
        return last_problem(self.log_tail(name, lines=200).splitlines())

    async def wait_first_exit(self) -> tuple[str, int]:
        """Block until any service exits; returns its name and exit code."""
        waits = {asyncio.create_task(process.wait()): name for name, process in self.processes.items()}
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        finished = next(iter(done))
        return waits[finished], finished.result()

    async def restart(self, name: str, ready_timeout_s: float = 60.0) -> None:
        """Start `name` again (killed first if it still runs) on its address and wait until it serves."""
        process = self.processes.get(name)
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()
        await self._spawn(name, self.web_env() if name == WEB else None)
        await self.wait_serving(ready_timeout_s, (name,))

    async def keep_running(self, restarts: int = RESTARTS, window_s: float = RESTART_WINDOW_S,
                           on_restart: Callable[[str, int], None] | None = None) -> tuple[str, int]:
        """Start again a service that exits, as Kubernetes would, so a crash costs seconds rather than the
        session. Returns the service and its exit code once it exits more than `restarts` times within
        `window_s`, or cannot serve again (the caller then stops the group)."""
        exits: dict[str, list[float]] = {}
        while True:
            name, code = await self.wait_first_exit()
            now = time.monotonic()
            recent = [at for at in exits.get(name, []) if now - at < window_s]
            if len(recent) >= restarts:
                return name, code
            exits[name] = [*recent, now]
            if on_restart is not None:
                on_restart(name, code)
            try:
                await self.restart(name)
            except ServiceFailed:
                return name, self.processes[name].returncode or code

    async def supervise(self) -> tuple[str, int]:
        """Wait until a service exits, then stop the others; returns the one that exited and its code."""
        name, code = await self.wait_first_exit()
        await self.stop()
        return name, code

    async def stop(self, grace_s: float = 15.0) -> None:
        # The web front, then the scheduler, while the others still serve: its gateway:shutdown hooks run in hooks.
        for group in ((WEB,), ("scheduler",), tuple(name for name in reversed(SERVICES) if name != "scheduler")):
            for name in group:
                process = self.processes.get(name)
                if process is not None and process.returncode is None:
                    process.send_signal(signal.SIGTERM)
            for name in group:
                process = self.processes.get(name)
                if process is None:
                    continue
                try:
                    await asyncio.wait_for(process.wait(), grace_s)
                except TimeoutError:
                    process.kill()
                    await process.wait()


PROBLEM_LEVELS = ("error", "critical", "exception", "fatal")
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Failure)\b(:|$)")


def last_problem(lines: list[str], limit: int = 300) -> str:
    """The last error of a service log (JSON lines, or the raw traceback of a crash) as one short line."""
    for line in reversed(lines):
        line = line.strip()
        if not line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if isinstance(entry, dict):
            if str(entry.get("level", "")).lower() not in PROBLEM_LEVELS:
                continue
            detail = entry.get("error") or entry.get("details") or _last_line(entry.get("exception"))
            text = f"{entry.get('event', 'error')}: {detail}" if detail else str(entry.get("event", "error"))
        elif EXCEPTION_LINE.match(line):
            text = line  # the last line of a traceback: "OSError: [Errno 98] Address already in use"
        else:
            continue
        return text if len(text) <= limit else text[: limit - 1] + "…"
    return ""


def _last_line(text: object) -> str:
    lines = [line for line in str(text or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""

