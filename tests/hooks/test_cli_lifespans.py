"""provide_lifespan around `covel plugin <plugin> <command>` (covel_cli/plugin_commands.py): entered before the
command runs, left after it; the one whose enter raises is reported to on_error and skipped."""

from __future__ import annotations

import json
import os

from covel_cli.main import main
from shared.settings import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "plugins"


def test_a_command_runs_inside_the_plugins_lifespans(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("COVEL_PLUGIN_DIRS", os.pathsep.join([str(REPO_ROOT / "plugins"), str(FIXTURES)]))
    monkeypatch.setenv("COVEL_DATA_DIR", str(tmp_path))
    assert main(["plugin", "lifespan-probe", "open"]) == 0
    # (The CLI's log lines, the cellar's warning among them, share stdout.)
    assert "lamp,hearth" in capsys.readouterr().out.splitlines()
    records = [json.loads(line) for line in (tmp_path / "lifespan-probe.jsonl").read_text().splitlines()]
    assert [(r["event"], r.get("lifespan") or r.get("stage")) for r in records] == [
        ("enter", "lamp"), ("on_error", "provide_lifespan"), ("enter", "hearth"), ("exit", "hearth"), ("exit", "lamp")]
