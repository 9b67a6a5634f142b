"""`covel check-prompts` (covel_cli/prompt_parity.py): the repository's builtin agent prompts pass against the committed
lock; a missing variant, a variant that mentions other tools, blocks or inputs, and an English changed after the
lock each fail, and `--lock` records the English the variants now follow."""

from __future__ import annotations

import shutil
from pathlib import Path

from covel_cli.prompt_parity import LOCK_NAME, agent_prompts, problems, write_lock
from shared.settings import REPO_ROOT

PLUGINS = REPO_ROOT / "plugins"


def test_the_builtin_prompts_follow_their_english_and_the_lock() -> None:
    assert len(agent_prompts(PLUGINS)) >= 10
    assert problems(PLUGINS) == []


def test_each_drift_is_reported(tmp_path: Path) -> None:
    shutil.copytree(PLUGINS / "affinity", tmp_path / "affinity")
    shutil.copytree(PLUGINS / "guide", tmp_path / "guide")
    write_lock(tmp_path)
    assert (tmp_path / LOCK_NAME).is_file() and problems(tmp_path) == []
    judge = tmp_path / "affinity" / "runtimes" / "judge" / "RUNTIME.md"
    judge.write_text(judge.read_text(encoding="utf-8") + "\nAlso read <mood> and runtime-inputs.weather.\n", encoding="utf-8")
    (tmp_path / "guide" / "PLUGIN.zh.md").unlink()
    found = problems(tmp_path)
    assert any(line.startswith("affinity/runtimes/judge/RUNTIME.zh.md: blocks differ") and "'mood'" in line for line in found)
    assert any(line.startswith("affinity/runtimes/judge/RUNTIME.zh.md: inputs differ") for line in found)
    assert any("affinity/runtimes/judge/RUNTIME.zh.md: the English (RUNTIME.md) changed since" in line for line in found)
    assert "guide/PLUGIN.zh.md: missing; a builtin agent's prompt has a Simplified Chinese variant" in found
