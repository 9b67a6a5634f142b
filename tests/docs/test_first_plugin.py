"""docs/plugin-guide.md's "Your first plugin", followed step by step: the files it shows written where it says,
its check run as written, the services started with the plugin folder it names, its `covel play` lines played
through the real services, and its log line found in the hooks service's log."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from covel_cli.launcher import ServiceGroup, free_port_addrs
from covel_cli.play import play, scripted_reader
from shared.settings import REPO_ROOT

GUIDE = REPO_ROOT / "docs" / "plugin-guide.md"
BLOCK = re.compile(r"<!-- (file: (?P<path>\S+)|run|play) -->\n```[a-z]*\n(?P<body>.*?)```", re.DOTALL)


def steps() -> list[tuple[str, str, str]]:
    """(kind, path, body) of each marked block of the first-plugin section, in order."""
    section = GUIDE.read_text(encoding="utf-8").split("## Your first plugin", 1)[1].split("\n## ", 1)[0]
    return [("file" if match["path"] else match.group(1), match["path"] or "", match["body"]) for match in BLOCK.finditer(section)]


def test_the_guide_marks_its_steps() -> None:
    assert [kind for kind, _, _ in steps()] == ["file", "file", "run", "play"]


@pytest.mark.asyncio(loop_scope="session")
async def test_a_first_plugin_from_an_empty_folder_to_a_session(tmp_path: Path) -> None:
    plays: list[str] = []
    for kind, path, body in steps():
        if kind == "file":
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(body, encoding="utf-8")
        elif kind == "run":
            for command in body.strip().splitlines():
                assert command.startswith(".venv/bin/covel "), command
                done = subprocess.run([sys.executable, "-m", "covel_cli.main", *command.split()[1:]], cwd=tmp_path,
                                      capture_output=True, text=True, timeout=180)
                assert done.returncode == 0, done.stdout + done.stderr
        else:
            plays = [line.removeprefix("> ") for line in body.strip().splitlines()]
    # Step 5: `COVEL_PLUGIN_DIRS=plugins:my-plugins covel up`, then `covel play --world none --plugin lantern-keeper`.
    group = ServiceGroup(free_port_addrs(), tmp_path / "data",
                         extra_env={"COVEL_PLUGIN_DIRS": f"{REPO_ROOT / 'plugins'}:{tmp_path / 'my-plugins'}"})
    await group.start()
    try:
        out = io.StringIO()
        assert await play(group.addrs["scheduler"], scripted_reader(plays), out, echo_input=True,
                          requested_plugins=["lantern-keeper"]) == 0
    finally:
        await group.stop()
    shown = out.getvalue()
    turns = shown.split("\n> ")[1:]
    assert [turn.splitlines()[0] for turn in turns] == plays, shown
    approve, lit, blown, lantern = turns
    assert "committed" in lit and "(error" not in shown, shown
    assert "The lantern will not go out." in blown, blown
    assert "The lantern burns steady and warm." in lantern, lantern
    # Step 6: its log line, with the plugin id, the session and the turn.
    lines = [json.loads(line) for line in (group.log_dir / "hooks.log").read_text().splitlines() if line.startswith("{")]
    logged = [line for line in lines if line.get("plugin_id") == "lantern-keeper" and line.get("event") == "plugin.log"]
    assert logged and logged[0]["message"] == "the lantern burned another turn" and logged[0]["fields"] == {"turns": "1"}, logged
    assert logged[0]["session_id"] and logged[0]["turn_id"]
