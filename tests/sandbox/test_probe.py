"""The registry's registration probe runs community entry code before anyone approved it: in the
sandbox, as the hooks service's workers do (services/registry/entry_registrations.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    answer = json.loads(done.stdout.decode().splitlines()[0])
    seen = json.loads(answer["error"].split("RuntimeError: ", 1)[1])
    assert seen["covelEnv"] == []
    if os.geteuid() == 0:
        assert seen["uid"] == 65534
    assert seen["pid"] == 1, "alone in its PID namespace (this kernel allows one)"
