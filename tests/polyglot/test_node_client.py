"""The gRPC API from outside Python: tests/polyglot/node/client.mjs (@grpc/grpc-js and
@grpc/proto-loader from npm, loading protos/ at run time, no generated code) plays two turns
against the five real services."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import subprocess

import pytest

from shared.settings import REPO_ROOT
from tests.e2e.conftest import running_services
from tests.support.builtin_plugins import non_story_core_plugin_ids

NODE_DIR = REPO_ROOT / "tests" / "polyglot" / "node"
ACTIONS = ["I light the lantern and step into the cellar.", "I open the old chest."]


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not on PATH: install Node.js 18+ (Debian: apt-get install nodejs npm)")
    return found


@pytest.fixture(scope="module")
def node_client() -> list[str]:
    """`npm ci` once per package-lock.json (its hash is kept in node_modules), then the command."""
    lock_hash = hashlib.sha256((NODE_DIR / "package-lock.json").read_bytes()).hexdigest()
    stamp = NODE_DIR / "node_modules" / ".covel-lock-sha256"
    if not stamp.exists() or stamp.read_text() != lock_hash:
        result = subprocess.run(
            [tool("npm"), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE_DIR, capture_output=True, text=True, timeout=300,
        )
        assert result.returncode == 0, f"npm ci failed:\n{result.stdout}\n{result.stderr}"
        stamp.write_text(lock_hash)
    return [tool("node"), str(NODE_DIR / "client.mjs")]


async def run_client(command: list[str], *args: str) -> subprocess.CompletedProcess:
    return await asyncio.to_thread(subprocess.run, [*command, *args], capture_output=True, text=True, timeout=120)


async def test_node_client_plays_two_turns(node_client, tmp_path):
    async with running_services(tmp_path) as group:
        # A minimal session: memory's detached job would update the turn record between GetTurn and ListTurns.
        excluded = [argument for plugin in non_story_core_plugin_ids() for argument in ("--exclude", plugin)]
        result = await run_client(node_client, "--addr", group.addrs["scheduler"], *excluded, *ACTIONS)
        assert result.returncode == 0, result.stderr
        played = json.loads(result.stdout)

        # And a bad request comes back as the gRPC status the server chose, by name.
        unknown = "00000000-0000-4000-8000-000000000000"
        refused = await run_client(node_client, "--addr", group.addrs["scheduler"], "--session", unknown, "look")

    assert played["session"]["active_plugins"] == ["narrator"]
    turns = played["turns"]
    assert [turn["action"] for turn in turns] == ACTIONS
    for number, played_turn in enumerate(turns, start=1):
        turn, events = played_turn["turn"], played_turn["events"]
        assert turn["status"] == "TURN_STATUS_COMMITTED"
        assert turn["logical_turn"] == str(number)  # int64 as a string: longs: String
        assert turn["player_message"] == played_turn["action"]
        assert events["first"] == "turn_started" and events["last"] == "turn_completed"
        assert events["counts"]["narrative_delta"] > 1, "the story arrives in pieces"
        # What was streamed is what was committed.
        assert played_turn["streamed_text"] == turn["narrative"] != ""
        assert {"runtime_id": "narrator", "plugin_id": "narrator", "status": "RUNTIME_STATUS_SUCCESS", "story": True} in turn["runtime_results"]
    assert "light the lantern" in turns[0]["turn"]["narrative"]
    # GetTurn and ListTurns return the turns as the streams recorded them.
    recorded = [played_turn["turn"] for played_turn in turns]
    assert played["get_turn"] == recorded
    assert played["list_turns"] == recorded

    assert refused.returncode == 1
    assert refused.stderr.startswith("covel node client: NOT_FOUND: "), refused.stderr
    assert unknown in refused.stderr
