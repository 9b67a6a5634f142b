"""The `covel` command as a user runs it: demo, and up with its supervision and health."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from covel_cli.launcher import free_port_addrs
from shared.settings import REPO_ROOT
from tests.conftest import free_addr


def cli_env(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name, addr in free_port_addrs().items():
        env[f"COVEL_{name.upper()}_ADDR"] = addr
    env["COVEL_WEB_ADDR"] = free_addr()
    env["COVEL_DATA_DIR"] = str(data_dir)
    return env


def covel(*args: str) -> list[str]:
    return [sys.executable, "-m", "covel_cli.main", *args]


def children_of(pid: int) -> dict[str, int]:
    """service name -> pid of the `python -m services.<name>` children of `pid`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid and b"-m" in cmdline:
            module = cmdline[cmdline.index(b"-m") + 1].decode()
            if module.startswith("services."):
                found[module.removeprefix("services.")] = int(entry.name)
    return found


def test_demo_prints_a_story_and_exits_zero(tmp_path: Path) -> None:
    result = subprocess.run(
        covel("demo", "--data-dir", str(tmp_path)), cwd=REPO_ROOT, env=cli_env(tmp_path),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "> I push open the door of the Drowned Lantern" in out
    assert "[turn 3 committed" in out and "✓ narrator" in out
    assert "push open the door" in out.split("> I push open the door of the Drowned Lantern", 1)[1]


def wait_until(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_up_starts_a_killed_service_again_and_stops_the_rest_when_one_keeps_dying(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    up = subprocess.Popen(covel("up"), cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        healthy = wait_until(
            lambda: subprocess.run(covel("health"), cwd=REPO_ROOT, env=env, capture_output=True).returncode == 0, 90
        )
        assert healthy, "covel health never saw all five SERVING"
        health = subprocess.run(covel("health"), cwd=REPO_ROOT, env=env, capture_output=True, text=True)
        assert health.stdout.count("SERVING") == 5
        services = children_of(up.pid)
        assert set(services) == {"store", "registry", "gateway", "hooks", "scheduler", "web"}, "the five and the web front"
        # Killed: started again on its address, the others untouched.
        killed = services["gateway"]
        os.kill(killed, signal.SIGKILL)
        assert wait_until(lambda: children_of(up.pid).get("gateway", killed) != killed and subprocess.run(
            covel("health"), cwd=REPO_ROOT, env=env, capture_output=True).returncode == 0, 60), "the gateway did not come back"
        assert {name: pid for name, pid in children_of(up.pid).items() if name != "gateway"} == \
            {name: pid for name, pid in services.items() if name != "gateway"}
        # Killed again and again: past its restarts, covel up stops everything with one clear line.
        for _ in range(3):
            current = children_of(up.pid).get("gateway")
            if current is None:
                break
            os.kill(current, signal.SIGKILL)
            wait_until(lambda current=current: up.poll() is not None or children_of(up.pid).get("gateway", current) != current, 60)
        _, stderr = up.communicate(timeout=60)
        assert up.returncode == 1
        assert "service gateway exited with code -9; starting it again" in stderr
        assert "service gateway exited with code -9, more than 3 times in 60 s; stopping the others" in stderr
        assert '{"' not in stderr, "clear lines, not the service's raw JSON log"
        for pid in services.values():
            assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            up.wait(timeout=60)


def test_up_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    up = subprocess.Popen(covel("up"), cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: len(children_of(up.pid)) == 6 and subprocess.run(
            covel("health"), cwd=REPO_ROOT, env=env, capture_output=True).returncode == 0, 90)
        services = children_of(up.pid)
        up.send_signal(signal.SIGTERM)
        stdout, _ = up.communicate(timeout=60)
        assert up.returncode == 0
        assert "covel up: stopped." in stdout
        assert children_of(up.pid) == {}
        assert all(not Path(f"/proc/{pid}").exists() for pid in services.values())
    finally:
        if up.poll() is None:
            up.kill()


def test_up_names_why_a_service_failed_to_start_in_one_line(tmp_path: Path) -> None:
    env = cli_env(tmp_path) | {"COVEL_STORE_DATABASE_URL": "nosuchdb://nowhere/covel"}
    result = subprocess.run(covel("up"), cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    [line] = [line for line in result.stderr.splitlines() if line.startswith("covel up:")]
    assert "service store exited with code" in line and "nosuchdb" in line and "store.log" in line, result.stderr
    assert '{"' not in result.stderr and "Traceback" not in result.stderr


def test_up_names_a_web_address_that_is_taken(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env["COVEL_WEB_ADDR"] = f"127.0.0.1:{taken.getsockname()[1]}"
        result = subprocess.run(covel("up"), cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    [line] = [line for line in result.stderr.splitlines() if line.startswith("covel up:")]
    assert "the web front exited with code 98" in line and "cannot listen on" in line, result.stderr
