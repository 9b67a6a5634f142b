"""The config file (shared/settings.py CovelSettings, covel_cli/config_file.py): every settings class reads it,
the environment wins, a rewrite keeps the file's other lines and is atomic, mode 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from covel_cli import config_file
from covel_cli.config_file import Unwritable, assignment, read_config, rewritten, shown, write_config
from covel_cli.launcher import ServiceGroup, free_port_addrs
from services.gateway.settings import GatewaySettings
from services.registry.settings import RegistrySettings
from services.scheduler.hooks.event_keys import EventKeySettings
from shared.sandbox import SandboxSettings
from shared.settings import CONFIG_FILE_VARIABLE
from shared.settings import config_file as configured_file

TEXT = """# Covel, this machine
COVEL_LOG_LEVEL=info

export COVEL_GATEWAY_OPENAI_MODEL=gpt-old  # the old one
COVEL_WEB_ADDR=127.0.0.1:9000
"""


@pytest.fixture
def env_file(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "covel.env"
    monkeypatch.setenv(CONFIG_FILE_VARIABLE, str(path))
    for name in ("COVEL_LOG_LEVEL", "COVEL_GATEWAY_OPENAI_MODEL", "COVEL_GATEWAY_SLOTS", "COVEL_SANDBOX_CPU_S",
                 "COVEL_PLUGIN_DIRS", "COVEL_SCHEDULER_SHUTDOWN_HOOK_BUDGET_MS"):
        monkeypatch.delenv(name, raising=False)
    return path


def test_every_settings_class_reads_the_file_and_the_environment_wins(env_file: Path, monkeypatch, tmp_path: Path) -> None:
    env_file.write_text(f"COVEL_LOG_LEVEL=debug\nCOVEL_GATEWAY_SLOTS='{{\"fast\": \"scripted\"}}'\nCOVEL_SANDBOX_CPU_S=99\n"
                        f"COVEL_PLUGIN_DIRS={tmp_path}\nCOVEL_SCHEDULER_SHUTDOWN_HOOK_BUDGET_MS=1234\nOTHER_TOOL=1\n")
    gateway = GatewaySettings()
    assert (gateway.log_level, gateway.gateway_slots) == ("debug", {"fast": "scripted"})
    assert SandboxSettings().sandbox_cpu_s == 99 and RegistrySettings().plugin_dirs == [tmp_path]
    assert EventKeySettings().scheduler_shutdown_hook_budget_ms == 1234
    monkeypatch.setenv("COVEL_LOG_LEVEL", "warning")
    assert GatewaySettings().log_level == "warning", "the environment wins over the file"
    env_file.unlink()
    assert GatewaySettings().gateway_slots == {}, "a missing file is no error"


def test_the_default_file_is_covel_env_in_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(CONFIG_FILE_VARIABLE, raising=False)
    monkeypatch.delenv("COVEL_LOG_LEVEL", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "covel.env").write_text("COVEL_LOG_LEVEL=error\n")
    assert configured_file() == Path("covel.env") and GatewaySettings().log_level == "error"


def test_covel_up_passes_the_file_on_to_the_services_it_starts(tmp_path: Path, monkeypatch) -> None:
    """Services run from the repository: they get this working directory's file as an absolute path."""
    monkeypatch.delenv(CONFIG_FILE_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    group = ServiceGroup(free_port_addrs(), tmp_path / "data")
    assert group.env()[CONFIG_FILE_VARIABLE] == str(tmp_path / "covel.env")
    monkeypatch.setenv(CONFIG_FILE_VARIABLE, "conf/mine.env")
    assert group.env("hooks")[CONFIG_FILE_VARIABLE] == str(tmp_path / "conf" / "mine.env")


def test_a_rewrite_keeps_comments_and_other_lines_and_changes_keys_in_place() -> None:
    text = rewritten(TEXT, {"COVEL_GATEWAY_OPENAI_MODEL": "gpt-new", "COVEL_API_TOKEN": "tok en", "COVEL_LOG_FORMAT": "console"},
                     {"COVEL_API_TOKEN": "--set", "COVEL_LOG_FORMAT": "--set"})
    assert text == """# Covel, this machine
COVEL_LOG_LEVEL=info

export COVEL_GATEWAY_OPENAI_MODEL=gpt-new
COVEL_WEB_ADDR=127.0.0.1:9000
# added by covel onboard (--set)
COVEL_API_TOKEN='tok en'
COVEL_LOG_FORMAT=console
"""


@pytest.mark.parametrize("value", ["plain", "two words", "it's", 'say "hi"', "$HOME", "a\\b", "", '{"a": [1, "b"]}', "$HOME's"])
def test_values_read_back_as_written(value: str) -> None:
    line = assignment("COVEL_X", value)
    assert config_file.dotenv_values(stream=config_file.io.StringIO(line + "\n"))["COVEL_X"] == value, line


@pytest.mark.parametrize("value", ["two\nlines", "nul\0", "${HOME}", "it's ${HOME}"])
def test_a_value_that_would_not_read_back_is_refused(value: str) -> None:
    with pytest.raises(Unwritable):
        assignment("COVEL_X", value)


def test_the_file_is_written_atomically_at_mode_0600(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "covel.env"
    path.write_text(TEXT)
    path.chmod(0o644)
    write_config(path, {"COVEL_LOG_LEVEL": "debug"}, {})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_config(path)["COVEL_LOG_LEVEL"] == "debug" and "# Covel, this machine" in path.read_text()

    def crash(source: str, target: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(config_file.os, "replace", crash)
    before = path.read_text()
    with pytest.raises(OSError, match="disk full"):
        write_config(path, {"COVEL_LOG_LEVEL": "error"}, {})
    assert path.read_text() == before, "a failed write leaves the file as it was"
    assert os.listdir(tmp_path) == ["covel.env"], "and no temporary file behind"


def test_secrets_are_not_shown() -> None:
    assert [shown(key, "v") for key in ("COVEL_API_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD", "X_SECRET", "COVEL_API_TOKEN_FILE",
                                        "COVEL_LOG_LEVEL")] == ["***", "***", "***", "***", "v", "v"]
