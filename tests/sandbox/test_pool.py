"""The sandbox pool with real worker processes: isolation, calls both ways, timeouts that stop
overrunning code, crashes that are reported and replaced, and one plugin's trouble kept to itself."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from services.hooks.sandboxed_entries import WORKER_OPERATIONS
from shared.sandbox import SandboxPool, SandboxSettings, WorkerGone
from shared.sandbox.operations import register_operations

pytestmark = pytest.mark.asyncio(loop_scope="session")
# The sandbox as it ships (the suite's default keeps probe plugins' folders: tests/conftest.py).
SHIPPED = SandboxSettings(sandbox_hide_dirs=True, sandbox_drop_privileges=True, sandbox_pass_env=[])

ENTRY = '''
import asyncio, os, time

def register(covel):
    covel.on("TurnStart", probe, timeout_ms=2000)
    covel.on("PreSchedule", sync_sleep, timeout_ms=200)
    covel.on("PostRuntime", async_spin, timeout_ms=200)
    covel.on("TurnStop", crash, timeout_ms=2000)

async def probe(ctx, payload):
    what = payload["what"]
    if what == "env":
        return {"v": sorted(os.environ)}
    if what == "read":
        try:
            with open(payload["path"], "rb") as file:
                return {"v": "read " + str(len(file.read()))}
        except OSError as error:
            return {"v": type(error).__name__}
    if what == "ids":
        return {"v": [os.getuid(), os.getpid(), sorted(int(p) for p in os.listdir("/proc") if p.isdigit())]}
    if what == "import":
        import importlib
        return {"v": importlib.import_module(payload["module"]).__name__}
    return {"v": what}

def sync_sleep(ctx, payload):
    time.sleep(10)

async def async_spin(ctx, payload):
    end = time.monotonic() + 10
    while time.monotonic() < end:
        pass

def crash(ctx, payload):
    os._exit(3)
'''


def view(event: str) -> dict:
    return {"event": event, "session_id": "s", "turn_id": "t", "locale": "en", "active_plugin_ids": ["probe"]}


@pytest.fixture(autouse=True)
def hooks_operations() -> None:
    """The workers serve the hooks service's operations (load, hook), registered as the service registers them."""
    register_operations(WORKER_OPERATIONS)


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    # Below tmp_path (a folder only root may enter): the worker reaches it through the descriptor it opened.
    root = tmp_path / "probe"
    (root / "server").mkdir(parents=True)
    (root / "server" / "index.py").write_text(ENTRY)
    for path in (root, root / "server", root / "server" / "index.py"):
        path.chmod(0o755)
    return root


async def loaded(pool: SandboxPool, root: Path, plugin_id: str = "probe"):
    workers = pool.plugin(plugin_id, root)
    answer = await workers.call("load", {"root": str(root), "entry": "server/index.py", "gen": 1})
    assert "hooks" in answer, answer
    assert [hook["event"] for hook in answer["hooks"]] == ["TurnStart", "PreSchedule", "PostRuntime", "TurnStop"]
    return workers


async def hook(workers, index: int, payload: dict, timeout_s: float = 5.0):
    call = workers.call("hook", {"gen": 1, "i": index, "view": view("TurnStart"), "payload": payload},
                        deadline=time.monotonic() + timeout_s)
    return await asyncio.wait_for(call, timeout_s)


async def test_a_worker_sees_no_secrets_no_other_process_and_no_root_file(plugin_dir: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COVEL_GATEWAY_API_KEY", "sk-secret")
    secret = tmp_path / "covel.db"
    secret.write_bytes(b"SQLite format 3\x00")
    secret.chmod(0o600)
    pool = SandboxPool(SHIPPED, "test", data_dir=tmp_path)
    try:
        workers = await loaded(pool, plugin_dir)
        env = (await hook(workers, 0, {"what": "env"}))["v"]["v"]
        assert not [name for name in env if name.startswith("COVEL_")], env
        report = pool.isolation_report
        assert report is not None
        # Hidden under an empty tmpfs (FileNotFoundError), and unreadable to the sandbox uid besides.
        assert (await hook(workers, 0, {"what": "read", "path": str(secret)}))["v"]["v"] in ("PermissionError", "FileNotFoundError")
        if os.geteuid() == 0:
            assert report["uid"] == 65534
        assert (await hook(workers, 0, {"what": "read", "path": f"/proc/{os.getpid()}/environ"}))["v"]["v"] in (
            "PermissionError", "FileNotFoundError")
        if report["namespaces"].startswith("pid"):
            uid, pid, visible = (await hook(workers, 0, {"what": "ids"}))["v"]["v"]
            assert pid == 1 and os.getpid() not in visible
    finally:
        await pool.close()


async def test_a_worker_imports_the_standard_library_after_giving_up_root(plugin_dir: Path, tmp_path: Path) -> None:
    """Python's library may sit below a folder only root may enter (e.g. /root/.pyenv): a module nothing
    imported before the uid drop is still found, through the folder's descriptor."""
    pool = SandboxPool(SHIPPED, "test", data_dir=tmp_path)
    try:
        workers = await loaded(pool, plugin_dir)
        for module in ("colorsys", "difflib", "pprint", "json.tool"):
            assert (await hook(workers, 0, {"what": "import", "module": module}))["v"]["v"] == module
    finally:
        await pool.close()


async def test_a_sync_handler_past_its_timeout_has_its_worker_replaced_and_killed(plugin_dir: Path) -> None:
    pool = SandboxPool(SHIPPED, "test")
    try:
        workers = await loaded(pool, plugin_dir)
        first = await workers.worker()
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await hook(workers, 1, {}, timeout_s=0.2)
        # The next call is answered at once (by the old worker while its replacement starts), not after the 10 s sleep.
        assert (await hook(workers, 0, {"what": "again"}))["v"] == {"v": "again"}
        assert time.monotonic() - started < 2
        # The replacement takes over and the old worker, its sleeping thread with it, is killed.
        await asyncio.wait_for(first.process.wait(), 10)
        assert time.monotonic() - started < 10
        assert (await workers.worker()) is not first and first.gone and "replaced" in first.gone
        assert workers.faults == 1
    finally:
        await pool.close()


async def test_a_hung_event_loop_is_killed_and_other_plugins_are_not_held_up(plugin_dir: Path, tmp_path: Path) -> None:
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    (other_dir / "server").mkdir()
    (other_dir / "server" / "index.py").write_text(ENTRY)
    pool = SandboxPool(SHIPPED, "test")
    try:
        workers, other = await asyncio.gather(loaded(pool, plugin_dir), loaded(pool, other_dir, "other"))
        first = await workers.worker()
        spinning = asyncio.ensure_future(hook(workers, 2, {}, timeout_s=0.3))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        assert (await hook(other, 0, {"what": "meanwhile"}))["v"] == {"v": "meanwhile"}
        assert time.monotonic() - started < 0.25, "another plugin's call waited for the spinning one"
        with pytest.raises(TimeoutError):
            await spinning
        await asyncio.wait_for(first.process.wait(), 5)
        assert first.gone and "hung" in first.gone
    finally:
        await pool.close()


async def test_a_crash_fails_the_call_in_flight_and_the_next_call_gets_a_fresh_worker(plugin_dir: Path) -> None:
    pool = SandboxPool(SHIPPED, "test")
    try:
        workers = await loaded(pool, plugin_dir)
        with pytest.raises(WorkerGone, match=r"exited \(exit code 3\)"):
            await hook(workers, 3, {})
        assert workers.faults == 1
        workers.setup = None  # the fresh worker is loaded by hand below, as the hooks service would
        await loaded(pool, plugin_dir)
        assert (await hook(workers, 0, {"what": "back"}))["v"] == {"v": "back"}
    finally:
        await pool.close()
