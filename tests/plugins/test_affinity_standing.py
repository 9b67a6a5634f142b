"""affinity's apply runtime records each character's tier with the score and the change, and its panel shows the
three (the spec: 右栏显示分数、档位和变化)."""

from __future__ import annotations

import json
from types import MappingProxyType, SimpleNamespace

from shared.settings import REPO_ROOT
from shared.ui_panels import render_text

PANEL = json.loads((REPO_ROOT / "plugins" / "affinity" / "ui" / "right.json").read_text(encoding="utf-8"))


class Data:
    """ctx.plugin_data as the handler uses it, on a dict."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}

    async def get(self, namespace, key, default=None):
        return self.rows.get(key, default)

    async def set(self, namespace, key, value):
        self.rows[key] = dict(value)

    async def update(self, namespace, key, operations):
        for operation in operations:
            if operation["op"] == "inc":
                self.rows[key]["score"] += operation["by"]
            else:
                self.rows[key].update(operation["value"])


async def test_the_tier_and_the_change_are_recorded_and_shown() -> None:
    from plugins.affinity.runtimes.apply.handler import handler

    data = Data()
    world = SimpleNamespace(characters=({"id": "tobin", "name": "Old Tobin", "aliases": ["Tobin"]},))
    for delta, reason in ((10, "the player helped him"), (10, "the player thanked him"), (5, "a kind word")):
        changes = [{"character": "Tobin", "delta": delta, "reason": reason}]
        await handler(SimpleNamespace(world=world, plugin_data=data, inputs=MappingProxyType({"changes": {"value": changes}})))
    assert data.rows["tobin"] == {"id": "tobin", "name": "Old Tobin", "score": 25, "tier": "warm", "lastChange": 5, "reason": "a kind word"}
    assert render_text(PANEL, {"data": {"scores": data.rows}}) == ["Standing", "Old Tobin: 25 · warm · change 5"]
