"""The Python client package (clients/python, `make clients`): built as a wheel from protos/, unpacked where
nothing of the kernel is importable, and its one-page example plays a session against the five services: two turns,
the turns listed a page at a time, a missing session's error decoded (reason and ResourceInfo); and its turn stream
asks for batches and gives their events one by one (docs/api.md, "Batched events")."""

from __future__ import annotations

import asyncio
import json
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
# A turn through Client.submit, and the raw stream that asked for batches: what each gave, as JSON.
BATCHES = """
import asyncio, json, sys
from covel_client import Client
from covel_client.v1 import resources_pb2, scheduler_pb2

async def main(addr, excluded):
    async with Client(addr) as covel:
        session = await covel.create_session(scheduler_pb2.CreateSessionRequest(excluded_plugins=excluded))
        kinds = [event.WhichOneof("event") async for event in covel.submit(session.id, "I look around.")]
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, batch_events=True,
                                                     actions=[resources_pb2.PlayerAction(kind="act", text="I wait.")])
        raw = [message.WhichOneof("event") async for message in covel.stub.SubmitActions(request)]
    print(json.dumps({"kinds": kinds, "raw": raw}))

asyncio.run(main(sys.argv[1], sys.argv[2].split(",")))
"""


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
        batched = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", BATCHES, group.addrs["scheduler"], env["EXCLUDED_PLUGINS"]],
                                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("session ") and f"> {ACTIONS[0]}" in lines and f"> {ACTIONS[1]}" in lines, done.stdout
    assert "light the lantern" in done.stdout.split(f"> {ACTIONS[0]}")[1], done.stdout
    assert "2 turns recorded" in lines, done.stdout
    assert lines[-1] == "asked for a missing session: NOT_FOUND SESSION_NOT_FOUND ('covel.scheduler.v1.Session', 'no-such-session')", lines[-1]
    assert batched.returncode == 0, batched.stderr
    seen = json.loads(batched.stdout)
    # The raw stream sent batches; the client gave every event of them, none a batch, the turn's start to its record.
    assert "batch" in seen["raw"] and "batch" not in seen["kinds"], seen
    assert seen["kinds"][0] == "turn_started" and seen["kinds"][-1] == "turn_completed" and "narrative_delta" in seen["kinds"], seen
