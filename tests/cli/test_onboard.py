"""`covel onboard` (covel_cli/onboard.py) against tests/fixtures/plugins/onboard-probe, written against the spec's
onboard_config signature only: what it merges, refuses and reports, its flags and exit codes, and a service's
settings class reading the file it wrote."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from covel_cli.config_file import read_config
from covel_cli.main import main
from covel_cli.onboard import kernel_settings
from services.gateway.settings import GatewaySettings
from services.web.settings import WebSettings
from shared.settings import CONFIG_FILE_VARIABLE, REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "plugins"
PROBE = "onboard-probe"
WRITTEN = {"COVEL_LOG_LEVEL": "debug", "COVEL_GATEWAY_OPENAI_MODEL": "gpt-probe", "COVEL_API_TOKEN": "s3cret token",
           "COVEL_WEB_CALL_TIMEOUT_S": "12.5", "COVEL_GATEWAY_SLOTS": '{"fast": "gpt-probe"}'}


@pytest.fixture
def env_file(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "covel.env"
    monkeypatch.setenv(CONFIG_FILE_VARIABLE, str(path))
    monkeypatch.setenv("COVEL_PLUGIN_DIRS", os.pathsep.join([str(REPO_ROOT / "plugins"), str(FIXTURES)]))
    for name in [*WRITTEN, "COVEL_GATEWAY_OPENAI_BASE_URL"]:
        monkeypatch.delenv(name, raising=False)
    return path


def test_plugin_answers_are_merged_and_what_cannot_be_written_is_reported(env_file: Path, capsys) -> None:
    env_file.write_text("# mine\nCOVEL_LOG_LEVEL=info\nCOVEL_WEB_ADDR=127.0.0.1:9000\n")
    assert main(["onboard", "--plugin", PROBE]) == 0
    out, err = capsys.readouterr()
    assert read_config(env_file) == {**WRITTEN, "COVEL_WEB_ADDR": "127.0.0.1:9000"}
    assert env_file.read_text().startswith("# mine\nCOVEL_LOG_LEVEL=debug\nCOVEL_WEB_ADDR=127.0.0.1:9000\n# added by covel onboard")
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert "COVEL_API_TOKEN=***  (onboard-probe)" in out and "s3cret" not in out + err
    assert "COVEL_GATEWAY_SLOTS={\"fast\": \"gpt-probe\"}  (onboard-probe)" in out, "a later impl saw the merged config"
    assert f"{PROBE}: greeting: a setting of the plugin (contributes.settings): Covel has no operator-level value" in err
    assert f"{PROBE}: NOT_A_SETTING: not a setting Covel knows" in err
    assert f"{PROBE}: COVEL_HOOKS_FAULT_THRESHOLD: a value of type object" in err
    assert f"{PROBE}: Broken.onboard_config raised RuntimeError: onboarding bug" in err
    assert main(["onboard", "--plugin", PROBE]) == 0
    assert "nothing to change" in capsys.readouterr().out, "a second run finds the file as the plugin wants it"


def test_the_operators_set_wins_and_dry_run_writes_nothing(env_file: Path, capsys) -> None:
    assert main(["onboard", "--plugin", PROBE, "--set", "COVEL_LOG_LEVEL=warning", "--set",
                 "covel_gateway_openai_base_url=http://models.local/v1", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert not env_file.exists()
    assert "would change" in out and "COVEL_LOG_LEVEL=warning  (--set)" in out
    assert "COVEL_GATEWAY_OPENAI_BASE_URL=http://models.local/v1  (--set)" in out
    assert f"{PROBE}: COVEL_LOG_LEVEL: kept the value given with --set" in err


@pytest.mark.parametrize(("flags", "message"), [
    (["--set", "COVEL_NO_SUCH=1"], "--set COVEL_NO_SUCH: not a setting Covel knows"),
    (["--set", "COVEL_LOG_LEVEL"], "--set 'COVEL_LOG_LEVEL': write KEY=VALUE"),
    (["--set", "COVEL_CONFIG_FILE=x.env"], "--set COVEL_CONFIG_FILE: not a setting Covel knows"),
    (["--set", "COVEL_LOG_LEVEL=${HOME}"], "--set COVEL_LOG_LEVEL: a value that reads back the same"),
    (["--plugin", "no-such-plugin"], "--plugin no-such-plugin: no such plugin"),
])
def test_bad_flags_exit_2_naming_the_flag(env_file: Path, capsys, flags: list[str], message: str) -> None:
    assert main(["onboard", *flags]) == 2
    assert message in capsys.readouterr().err
    assert not env_file.exists()


def test_a_plugin_that_fails_to_load_exits_1_and_the_others_answers_are_written(env_file: Path, tmp_path: Path,
                                                                                monkeypatch, capsys) -> None:
    broken = tmp_path / "plugins" / "a-broken-plugin"
    (broken / "server").mkdir(parents=True)
    (broken / "PLUGIN.md").write_text("---\nversion: 0.1.0\n---\n")
    (broken / "server" / "index.py").write_text("def register(covel):\n    raise RuntimeError('cannot start')\n")
    monkeypatch.setenv("COVEL_PLUGIN_DIRS", os.pathsep.join([str(tmp_path / "plugins"), str(FIXTURES)]))
    assert main(["onboard", "--plugin", "a-broken-plugin", "--plugin", PROBE]) == 1
    assert "a-broken-plugin: server/index.py failed to load: RuntimeError: cannot start" in capsys.readouterr().err
    assert read_config(env_file) == WRITTEN


def test_every_installed_plugin_loads_and_the_kernel_settings_are_the_documented_ones(env_file: Path) -> None:
    assert main(["onboard", "--dry-run"]) == 0, "the builtin and fixture plugins all load in the CLI"
    documented = (REPO_ROOT / "docs" / "settings.md").read_text()
    assert kernel_settings() and all(f"`{name}`" in documented for name in kernel_settings())


def test_covel_onboard_writes_a_file_a_service_settings_class_reads(tmp_path: Path, monkeypatch) -> None:
    """The real command from a working directory (its default ./covel.env), then the gateway's and the web front's
    settings read what it wrote; the environment still wins."""
    env = {key: value for key, value in os.environ.items() if key not in WRITTEN and key != CONFIG_FILE_VARIABLE}
    env["COVEL_PLUGIN_DIRS"] = str(FIXTURES)
    done = subprocess.run([str(REPO_ROOT / ".venv" / "bin" / "covel"), "onboard", "--plugin", PROBE, "--set",
                           "COVEL_GATEWAY_OPENAI_BASE_URL=http://models.local/v1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert f"{tmp_path / 'covel.env'}: changed" in done.stdout
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(CONFIG_FILE_VARIABLE, raising=False)
    for name in [*WRITTEN, "COVEL_GATEWAY_OPENAI_BASE_URL"]:
        monkeypatch.delenv(name, raising=False)
    gateway = GatewaySettings()
    assert (gateway.gateway_openai_base_url, gateway.gateway_openai_model) == ("http://models.local/v1", "gpt-probe")
    assert gateway.gateway_slots == {"fast": "gpt-probe"} and gateway.log_level == "debug"
    assert gateway.api_token is not None and gateway.api_token.get_secret_value() == "s3cret token"
    assert WebSettings().web_call_timeout_s == 12.5
    monkeypatch.setenv("COVEL_GATEWAY_OPENAI_MODEL", "gpt-env")
    assert GatewaySettings().gateway_openai_model == "gpt-env"
