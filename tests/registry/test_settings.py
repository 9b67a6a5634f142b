from __future__ import annotations

from pathlib import Path

import pytest

from services.registry.settings import RegistrySettings, source_of
from shared.settings import default_plugin_dirs


def test_plugin_dirs_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COVEL_PLUGIN_DIRS", "/a:/b,/c")
    assert RegistrySettings().plugin_dirs == [Path("/a"), Path("/b"), Path("/c")]


def test_plugin_dirs_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COVEL_PLUGIN_DIRS", raising=False)
    assert RegistrySettings().plugin_dirs == default_plugin_dirs()


def test_source(tmp_path: Path) -> None:
    assert source_of(default_plugin_dirs()[0]) == "builtin"
    assert source_of(tmp_path) == "community"
