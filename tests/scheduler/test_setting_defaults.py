"""Plugins read their manifest's setting defaults where the session set no value."""

from __future__ import annotations

from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Package
from services.scheduler.turn.runnable import settings_with_defaults
from shared.structs import from_struct, to_struct
from tests.scheduler.compiled import compiled_package


def package(plugin_id: str, settings: list[dict]) -> Package:
    return compiled_package(plugin_id, package={"contributes": {"settings": settings}})


def test_defaults_fill_in_under_the_sessions_values():
    session = store_pb2.Session(id="s", plugin_settings={"narrator": to_struct({"tone": "dry"})})
    packages = [package("narrator", [{"key": "person", "type": "text", "default": "second"},
                                     {"key": "tone", "type": "text", "default": "warm"}, {"key": "extra", "type": "text", "default": None}]),
                package("guide", [{"key": "count", "type": "integer", "default": 4}]), package("plain", [])]
    filled = settings_with_defaults(session, packages)
    assert from_struct(filled.plugin_settings["narrator"]) == {"person": "second", "tone": "dry"}
    assert from_struct(filled.plugin_settings["guide"]) == {"count": 4}
    assert "plain" not in filled.plugin_settings
    # The session itself is not changed, and nothing to fill gives None.
    assert from_struct(session.plugin_settings["narrator"]) == {"tone": "dry"}
    assert settings_with_defaults(filled, packages) is None
