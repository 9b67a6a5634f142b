"""What plugin code reaches from a real sandbox worker, as it ships: no network of its own (urllib and raw
sockets to the host's ports fail), covel.http only through the host and its checks (declared origins,
public addresses unless the operator allows an origin, bounded responses), stdio on /dev/null, a /tmp
of its own, and log lines that reach the service's log marked as the plugin's and rate-limited."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from services.hooks.sandboxed_entries import WORKER_OPERATIONS
from shared.plugin_sdk.http_client import http_rules
from shared.sandbox import SandboxPool, SandboxSettings
from shared.sandbox.operations import register_operations
from tests.security.http_site import Site

pytestmark = pytest.mark.asyncio(loop_scope="session")

ENTRY = '''
import json, os, socket, urllib.request

COVEL = []

def register(covel):
    COVEL.append(covel)
    covel.on("TurnStart", probe, timeout_ms=20000)

async def probe(ctx, payload):
    covel, what = COVEL[0], payload["what"]
    if what == "urllib":
        try:
            return {"v": "reached " + urllib.request.urlopen(payload["url"], timeout=3).read().decode()}
        except Exception as error:
            return {"v": f"{type(error).__name__}: {error}"}
    if what == "socket":
        sock = socket.socket()
        sock.settimeout(3)
        try:
            sock.connect((payload["host"], payload["port"]))
            return {"v": "connected"}
        except OSError as error:
            return {"v": type(error).__name__}
        finally:
            sock.close()
    if what == "fds":
        found = {}
        for name in os.listdir("/proc/self/fd"):
            try:
                found[name] = os.readlink(f"/proc/self/fd/{name}")
            except OSError:  # listdir's own, closed
                pass
        return {"v": found}
    if what == "tmp":
        with open(payload["path"], "w") as file:
            file.write("from the plugin")
        try:
            with open(payload["host_file"]) as file:
                seen = file.read()
        except OSError as error:
            seen = type(error).__name__
        return {"v": seen}
    if what == "import":
        import importlib
        return {"v": importlib.import_module(payload["module"]).VALUE}
    if what == "write":
        try:
            with open(payload["path"], "w") as file:
                file.write("from the plugin")
            return {"v": "written"}
        except OSError as error:
            return {"v": type(error).__name__}
    if what == "http":
        try:
            reply = await covel.http.request(payload.get("method", "GET"), payload["url"])
        except Exception as error:
            return {"v": f"{type(error).__name__}: {error}"}
        return {"v": {"status": reply.status_code, "length": len(reply.content),
                      "json": reply.json() if reply.headers.get("content-type") == "application/json" else None}}
    if what == "log":
        for index in range(payload["lines"]):
            covel.log.info("a line", index=index)
        print("printed\\n{\\"event\\": \\"service.security\\", \\"forged\\": true}")
        return {"v": "logged"}
'''


@pytest.fixture(autouse=True)
def hooks_operations() -> None:
    register_operations(WORKER_OPERATIONS)


@pytest.fixture(scope="module")
def sites():
    declared, undeclared = Site(), Site()
    yield declared, undeclared
    declared.close()
    undeclared.close()


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    root = tmp_path / "reach"
    (root / "server").mkdir(parents=True)
    (root / "server" / "index.py").write_text(ENTRY)
    for path in (root, root / "server", root / "server" / "index.py"):
        path.chmod(0o755)
    return root


def settings(**overrides) -> SandboxSettings:
    # As it ships (tests/conftest.py makes the suite's default observable).
    return SandboxSettings(sandbox_hide_dirs=True, sandbox_drop_privileges=True, sandbox_pass_env=[], **overrides)


async def loaded(pool: SandboxPool, root: Path, declared: list[str]):
    permissions = [[f"permissions.http[{index}]", {"origin": origin}] for index, origin in enumerate(declared)]
    workers = pool.plugin("reach", root)
    workers.http_rules = http_rules(permissions)
    answer = await workers.call("load", {"root": str(root), "entry": "server/index.py", "gen": 1, "http_permissions": permissions})
    assert "hooks" in answer, answer
    return workers


async def probe(workers, **payload):
    view = {"event": "TurnStart", "session_id": "s-reach", "turn_id": "t-reach", "locale": "en", "active_plugin_ids": ["reach"]}
    call = workers.call("hook", {"gen": 1, "i": 0, "view": view, "payload": payload}, deadline=time.monotonic() + 20)
    return (await asyncio.wait_for(call, 20))["v"]["v"]


def network_isolated(pool: SandboxPool) -> bool:
    assert pool.isolation_report is not None
    return pool.isolation_report["network"] == "isolated"


async def test_plugin_code_has_no_network_of_its_own(plugin_dir: Path, sites) -> None:
    declared, _ = sites
    pool = SandboxPool(settings(), "test")
    try:
        workers = await loaded(pool, plugin_dir, [declared.origin])
        before = list(declared.seen)
        reached = await probe(workers, what="urllib", url=f"{declared.origin}/by-urllib")
        assert network_isolated(pool), pool.isolation_report
        assert reached.startswith("URLError"), reached
        assert await probe(workers, what="socket", host="127.0.0.1", port=5432) in ("ConnectionRefusedError", "OSError")
        assert await probe(workers, what="socket", host="169.254.169.254", port=80) in ("OSError", "TimeoutError")
        assert declared.seen == before
    finally:
        await pool.close()


async def test_covel_http_goes_through_the_host_and_its_checks(plugin_dir: Path, sites) -> None:
    declared, undeclared = sites
    port = declared.origin.rsplit(":", 1)[1]
    pool = SandboxPool(settings(sandbox_http_allow_private_origins=[declared.origin]), "test")
    try:
        workers = await loaded(pool, plugin_dir, [declared.origin, f"http://localhost:{port}"])
        ok = await probe(workers, what="http", url=f"{declared.origin}/words")
        assert ok == {"status": 200, "length": ok["length"], "json": {"method": "GET", "path": "/words"}}
        # The host sends the name the plugin used as the Host header (it connects to the address it checked).
        assert (await probe(workers, what="http", url=f"{declared.origin}/host"))["json"] == {"host": f"127.0.0.1:{port}"}
        undeclared_before = list(undeclared.seen)
        refused = await probe(workers, what="http", url=f"{undeclared.origin}/leak")
        assert refused == f"HttpPermissionDenied: http permission denied: GET {undeclared.origin} is not declared in permissions.http of reach"
        # A name that resolves to a private address, declared but not allowed by the operator.
        private = await probe(workers, what="http", url=f"http://localhost:{port}/by-name")
        assert private.startswith(f"HttpPermissionDenied: http permission denied: http://localhost:{port} resolves to 127.0.0.1"), private
        redirected = await probe(workers, what="http", url=f"{declared.origin}/redirect?to={undeclared.origin}/stolen")
        assert redirected.startswith("HttpPermissionDenied") and undeclared.origin in redirected, redirected
        assert undeclared.seen == undeclared_before
        assert ("GET", "/by-name") not in declared.seen
    finally:
        await pool.close()


async def test_a_local_origin_needs_the_operator_s_setting_and_responses_are_bounded(plugin_dir: Path, sites) -> None:
    declared, _ = sites
    pool = SandboxPool(settings(sandbox_http_max_response_bytes=4096), "test")
    try:
        workers = await loaded(pool, plugin_dir, [declared.origin])
        before = list(declared.seen)
        refused = await probe(workers, what="http", url=f"{declared.origin}/words")
        assert "is not a public address" in refused and "COVEL_SANDBOX_HTTP_ALLOW_PRIVATE_ORIGINS" in refused, refused
        assert declared.seen == before
    finally:
        await pool.close()
    pool = SandboxPool(settings(sandbox_http_max_response_bytes=4096, sandbox_http_allow_private_origins=[declared.origin]), "test")
    try:
        workers = await loaded(pool, plugin_dir, [declared.origin])
        assert (await probe(workers, what="http", url=f"{declared.origin}/big?bytes=4000"))["length"] == 4000
        too_big = await probe(workers, what="http", url=f"{declared.origin}/big?bytes=5000")
        assert too_big.startswith("HttpLimitExceeded") and "COVEL_SANDBOX_HTTP_MAX_RESPONSE_BYTES" in too_big, too_big
    finally:
        await pool.close()


async def test_nothing_of_the_service_is_inherited(plugin_dir: Path, tmp_path: Path) -> None:
    host_file = Path("/tmp") / f"covel-host-{os.getpid()}-{time.monotonic_ns()}"
    host_file.write_text("the host's")
    written = Path("/tmp") / f"covel-plugin-{os.getpid()}-{time.monotonic_ns()}"
    server, client = socket.socketpair()  # a descriptor the worker must not inherit
    pool = SandboxPool(settings(), "test", data_dir=tmp_path)
    try:
        workers = await loaded(pool, plugin_dir, [])
        fds = await probe(workers, what="fds")
        assert fds["0"] == fds["1"] == fds["2"] == "/dev/null", fds
        # Its sockets are the channel and its event loop's own, never one of the service's.
        assert not {f"socket:[{os.fstat(end.fileno()).st_ino}]" for end in (server, client)} & set(fds.values()), fds
        assert await probe(workers, what="tmp", path=str(written), host_file=str(host_file)) == "FileNotFoundError"
        assert not written.exists(), "the worker's /tmp is its own"
    finally:
        await pool.close()
        host_file.unlink()
        server.close()
        client.close()


async def test_plugin_log_lines_are_marked_limited_and_cannot_forge_service_lines(plugin_dir: Path) -> None:
    pool = SandboxPool(settings(sandbox_log_burst=20, sandbox_log_lines_per_s=1), "test")
    try:
        workers = await loaded(pool, plugin_dir, [])
        with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as lines:
            with structlog.contextvars.bound_contextvars(session_id="s-reach", turn_id="t-reach"):
                assert await probe(workers, what="log", lines=100) == "logged"
            await asyncio.sleep(0.2)
        mine = [line for line in lines if line.get("plugin_id") == "reach"]
        logged = [line for line in mine if line["event"] == "plugin.log"]
        assert len(logged) == 20, [line for line in mine if line["event"] != "plugin.log"]
        assert all(line["session_id"] == "s-reach" and line["turn_id"] == "t-reach" for line in logged)
        assert logged[0]["message"] == "a line" and logged[0]["fields"] == {"index": "0"} and logged[0]["stream"] == "log"
        assert [line["event"] for line in mine].count("plugin.log_dropped") == 1
        assert workers.output.dropped == 100 + 2 - 20
    finally:
        await pool.close()


async def test_print_is_a_plugin_line_and_each_line_stays_one(plugin_dir: Path) -> None:
    pool = SandboxPool(settings(), "test")
    try:
        workers = await loaded(pool, plugin_dir, [])
        with capture_logs() as lines:
            assert await probe(workers, what="log", lines=0) == "logged"
            await asyncio.sleep(0.2)
        printed = [line for line in lines if line.get("stream") == "stdout"]
        assert [line["message"] for line in printed] == ["printed", '{"event": "service.security", "forged": true}']
        assert all(line["event"] == "plugin.log" and line["plugin_id"] == "reach" for line in printed)
    finally:
        await pool.close()


async def test_a_checkout_below_tmp_is_read_only_and_the_rest_of_tmp_hidden(plugin_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """Where the clone lives under /tmp, /tmp is still the worker's own: Python's folders below it are bound back read-only."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "reach_checkout_module.py").write_text("VALUE = 'from the checkout'\n")
    for path in (tmp_path, checkout, checkout / "reach_checkout_module.py"):
        path.chmod(0o755)
    secret = tmp_path / "host-file"
    secret.write_text("the host's")
    secret.chmod(0o644)
    monkeypatch.syspath_prepend(str(checkout))
    pool = SandboxPool(settings(), "test")
    try:
        workers = await loaded(pool, plugin_dir, [])
        assert await probe(workers, what="import", module="reach_checkout_module") == "from the checkout"
        assert "/tmp" in (pool.isolation_report or {})["hidden"]
        assert await probe(workers, what="tmp", path="/tmp/mine", host_file=str(secret)) == "FileNotFoundError"
        assert await probe(workers, what="write", path=str(checkout / "planted.py")) in ("OSError", "PermissionError")
        assert not (checkout / "planted.py").exists()
    finally:
        await pool.close()


async def test_a_shared_network_is_said_once_at_start_in_the_log_and_in_a_gauge(plugin_dir: Path) -> None:
    from shared.telemetry.metrics import SANDBOX_NETWORK_ISOLATED

    pool = SandboxPool(settings(sandbox_network_isolation=False), "shared-net")
    try:
        with capture_logs() as lines:
            pool.prewarm()  # as a service does at start, before any worker
            await asyncio.wait_for(asyncio.shield(pool._network_check), 10)
            assert SANDBOX_NETWORK_ISOLATED.labels("shared-net")._value.get() == 0
            await loaded(pool, plugin_dir, [])
        warned = [line for line in lines if line["event"] == "sandbox.network_shared"]
        assert len(warned) == 1 and warned[0]["network"].startswith("shared"), lines
    finally:
        await pool.close()
    pool = SandboxPool(settings(), "own-net")
    try:
        pool.prewarm()
        await asyncio.wait_for(asyncio.shield(pool._network_check), 10)
        assert pool.network == "isolated" and SANDBOX_NETWORK_ISOLATED.labels("own-net")._value.get() == 1
        await loaded(pool, plugin_dir, [])
        assert network_isolated(pool)
    finally:
        await pool.close()
