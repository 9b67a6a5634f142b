"""Plugins read their manifest's setting defaults where the session set no value."""

from __future__ import annotations

from covel.registry.v1 import registry_pb2
from covel.store.v1 import store_pb2
from services.scheduler.turn.runner import settings_with_defaults
from shared.structs import from_struct, to_struct


def package(plugin_id: str, settings: list[dict]) -> registry_pb2.PluginPackage:
    return registry_pb2.PluginPackage(id=plugin_id, definition=to_struct({"contributes": {"settings": settings}}))


def test_defaults_fill_in_under_the_sessions_values():
    session = store_pb2.Session(id="s", plugin_settings={"narrator": to_struct({"tone": "dry"})})
    packages = [package("narrator", [{"key": "person", "default": "second"}, {"key": "tone", "default": "warm"},
                                     {"key": "extra", "default": None}]),
                package("guide", [{"key": "count", "default": 4}]), package("plain", [])]
    filled = settings_with_defaults(session, packages)
    assert from_struct(filled.plugin_settings["narrator"]) == {"person": "second", "tone": "dry"}
    assert from_struct(filled.plugin_settings["guide"]) == {"count": 4}
    assert "plain" not in filled.plugin_settings
    # The session itself is not changed, and nothing to fill gives None.
    assert from_struct(session.plugin_settings["narrator"]) == {"tone": "dry"}
    assert settings_with_defaults(filled, packages) is None
