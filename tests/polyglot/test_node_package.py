"""The Node.js client package (clients/node, `make clients`): packed with its protos, installed with npm into an
empty project, and its one-page example plays a session against the five services: two turns, the turns listed a
page at a time, a missing session's error decoded (reason and ResourceInfo); its turns ask for batches and are given
event by event (docs/api.md, "Batched events")."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys

import pytest

from shared.settings import REPO_ROOT
from tests.e2e.conftest import running_services
from tests.support.builtin_plugins import non_story_core_plugin_ids

sys.path.insert(0, str(REPO_ROOT / "clients"))
from build import build_node_package  # noqa: E402  (clients/build.py is no package: it runs as `make clients`)

EXAMPLE = REPO_ROOT / "clients" / "node" / "examples" / "play.mjs"
ACTIONS = ["I light the lantern and step into the cellar.", "I open the old chest."]
# A turn through the package's submit, and the raw stream asking for batches opened with eventsOf: what each gave.
BATCHES = """
import { connect, eventsOf } from "@covel/client";
const covel = connect(process.argv[2]);
const session = await covel.createSession({ excluded_plugins: process.argv[3].split(",") });
const kinds = [];
for await (const event of covel.submit(session.id, "I look around.")) kinds.push(event.event);
const raw = [];
const opened = [];
const request = { session_id: session.id, batch_events: true, actions: [{ kind: "act", text: "I wait." }] };
for await (const message of covel.stub.SubmitActions(request)) {
  raw.push(message.event);
  opened.push(...eventsOf(message).map((event) => event.event));
}
console.log(JSON.stringify({ kinds, raw, opened }));
covel.close();
"""


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not on PATH: install Node.js 18+ (Debian: apt-get install nodejs npm)")
    return found


async def test_the_node_client_package_plays_a_session(tmp_path) -> None:
    tool("node")
    packed = build_node_package(tmp_path / "dist")
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "covel-example", "private": True, "type": "module"}))
    installed = await asyncio.to_thread(subprocess.run, [tool("npm"), "install", "--no-audit", "--no-fund", "--loglevel=error", str(packed)],
                                        cwd=app, capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    shutil.copy(EXAMPLE, app / "play.mjs")
    async with running_services(tmp_path / "data") as group:
        env = {**os.environ, "EXCLUDED_PLUGINS": ",".join(non_story_core_plugin_ids())}
        done = await asyncio.to_thread(subprocess.run, [tool("node"), "play.mjs", group.addrs["scheduler"], *ACTIONS],
                                       capture_output=True, text=True, timeout=120, env=env, cwd=app)
        (app / "batches.mjs").write_text(BATCHES)
        batched = await asyncio.to_thread(subprocess.run, [tool("node"), "batches.mjs", group.addrs["scheduler"], env["EXCLUDED_PLUGINS"]],
                                          capture_output=True, text=True, timeout=120, cwd=app)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("session ") and f"> {ACTIONS[0]}" in lines and f"> {ACTIONS[1]}" in lines, done.stdout
    assert "2 turns recorded" in lines, done.stdout
    assert lines[-1] == 'asked for a missing session: NOT_FOUND SESSION_NOT_FOUND ["covel.scheduler.v1.Session","no-such-session"]', lines[-1]
    assert batched.returncode == 0, batched.stderr
    seen = json.loads(batched.stdout)
    # The raw stream sent batches; submit and eventsOf give every event of them, none a batch.
    assert "batch" in seen["raw"] and "batch" not in seen["kinds"] and "batch" not in seen["opened"], seen
    for kinds in (seen["kinds"], seen["opened"]):
        assert kinds[0] == "turn_started" and kinds[-1] == "turn_completed" and "narrative_delta" in kinds, seen
