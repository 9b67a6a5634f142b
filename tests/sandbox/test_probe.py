"""The registry's registration probe runs community entry code before anyone approved it: in the
sandbox, as the hooks service's workers do (services/registry/entry_registrations.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from services.registry.entry_registrations import _isolation, _probe_env
from tests.conftest import SHIPPED_SANDBOX

SPY = '''
import json, os

def register(covel):
    raise RuntimeError(json.dumps({"uid": os.getuid(), "pid": os.getpid(),
                                   "covelEnv": sorted(k for k in os.environ if k.startswith("COVEL") and k != "COVEL_PROBE")}))
'''


def test_the_probe_runs_entry_code_in_the_sandbox(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COVEL_REGISTRY_SECRET", "sk-probe")
    for name, value in SHIPPED_SANDBOX.items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "spy"
    (root / "server").mkdir(parents=True, mode=0o755)
    root.chmod(0o755)
    (root / "server" / "index.py").write_text(SPY)
    requests = [{"pluginId": "spy", "root": str(root), "entry": "server/index.py"}]
    done = subprocess.run([sys.executable, "-m", "shared.plugin_code.registration_probe", *_isolation([str(root)])],
                          input=json.dumps(requests).encode(), capture_output=True, env=_probe_env(), cwd="/", timeout=60, check=True)
    ready, line = done.stdout.decode().splitlines()[:2]
    assert json.loads(ready) == {"ready": True}
    answer = json.loads(line)
    seen = json.loads(answer["error"].split("RuntimeError: ", 1)[1])
    assert seen["covelEnv"] == []
    if os.geteuid() == 0:
        assert seen["uid"] == 65534
    assert seen["pid"] == 1, "alone in its PID namespace (this kernel allows one)"


HANGS = '''
def register(covel):
    while True:
        pass
'''


def _processes_of(uid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid and b"registration_probe" in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def test_plugin_code_busy_in_the_sandbox_dies_with_the_process_that_started_it(tmp_path: Path, monkeypatch) -> None:
    # The death signal is set again after the uid change, which clears it: a killed host leaves no orphan.
    for name, value in SHIPPED_SANDBOX.items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "hangs"
    (root / "server").mkdir(parents=True, mode=0o755)
    root.chmod(0o755)
    (root / "server" / "index.py").write_text(HANGS)
    uid = 65534 if os.geteuid() == 0 else os.geteuid()
    before = _processes_of(uid)
    requests = [{"pluginId": "hangs", "root": str(root), "entry": "server/index.py"}]
    probe = subprocess.Popen([sys.executable, "-m", "shared.plugin_code.registration_probe", *_isolation([str(root)])],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=_probe_env(), cwd="/")
    assert probe.stdin is not None
    probe.stdin.write(json.dumps(requests).encode())
    probe.stdin.close()
    deadline = time.monotonic() + 30
    while not (_processes_of(uid) - before - {probe.pid}) and time.monotonic() < deadline:
        time.sleep(0.05)
    inner = _processes_of(uid) - before - {probe.pid}
    assert inner, "the probe's process in its namespace never started"
    time.sleep(0.5)  # inside register() by now
    probe.kill()
    probe.wait()
    deadline = time.monotonic() + 10
    while inner & _processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not inner & _processes_of(uid), "plugin code outlived the process that started it"
