"""The Python client package (clients/python, `make clients`): built as a wheel from protos/, unpacked where
nothing of the kernel is importable, and its one-page example plays a session against the five services: two turns,
the turns listed a page at a time, a missing session's error decoded (reason and ResourceInfo)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import zipfile

from shared.settings import REPO_ROOT
from tests.e2e.conftest import running_services
from tests.support.builtin_plugins import non_story_core_plugin_ids

sys.path.insert(0, str(REPO_ROOT / "clients"))
from build import build_python_wheel  # noqa: E402  (clients/build.py is no package: it runs as `make clients`)

EXAMPLE = REPO_ROOT / "clients" / "python" / "examples" / "play.py"
ACTIONS = ["I light the lantern and step into the cellar.", "I open the old chest."]


async def test_the_python_client_package_plays_a_session(tmp_path) -> None:
    wheel = build_python_wheel(tmp_path / "dist")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    assert (site / "covel_client" / "py.typed").exists() and (site / "covel_client" / "v1" / "scheduler_pb2.pyi").exists()
    async with running_services(tmp_path / "data") as group:
        env = {**os.environ, "PYTHONPATH": str(site), "EXCLUDED_PLUGINS": ",".join(non_story_core_plugin_ids())}
        done = await asyncio.to_thread(subprocess.run, [sys.executable, str(EXAMPLE), group.addrs["scheduler"], *ACTIONS],
                                       capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("session ") and f"> {ACTIONS[0]}" in lines and f"> {ACTIONS[1]}" in lines, done.stdout
    assert "light the lantern" in done.stdout.split(f"> {ACTIONS[0]}")[1], done.stdout
    assert "2 turns recorded" in lines, done.stdout
    assert lines[-1] == "asked for a missing session: NOT_FOUND SESSION_NOT_FOUND ('covel.scheduler.v1.Session', 'no-such-session')", lines[-1]
