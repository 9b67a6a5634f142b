"""register_cli_commands: a plugin's commands under `covel plugin <plugin>` (covel_cli/plugin_commands.py)."""

from __future__ import annotations

import os

import pytest

from covel_cli.main import main
from shared.settings import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "plugins"


@pytest.fixture
def plugin_dirs(monkeypatch):
    monkeypatch.setenv("COVEL_PLUGIN_DIRS", os.pathsep.join([str(REPO_ROOT / "plugins"), str(FIXTURES)]))


def test_a_plugins_commands_run_with_their_arguments_and_exit_codes(plugin_dirs, capsys) -> None:
    assert main(["plugin", "cli-probe", "greet", "--name", "Wren"]) == 0
    assert capsys.readouterr().out == "Hello, Wren!\n"
    assert main(["plugin", "cli-probe", "count", "5"]) == 3
    assert capsys.readouterr().out == "1 2 3 4 5\n"


def test_a_plugin_without_commands_or_an_unknown_plugin_is_reported(plugin_dirs, capsys) -> None:
    assert main(["plugin", "stdio-channel", "anything"]) == 1
    assert "covel plugin: stdio-channel adds no command (register_cli_commands)" in capsys.readouterr().err
    assert main(["plugin", "no-such-plugin", "x"]) == 1
    assert "no plugin 'no-such-plugin'" in capsys.readouterr().err
