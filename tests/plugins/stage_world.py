"""The fixture world of scene-stage, soundtrack and character-blueprint (tests/fixtures/stage-worlds/lantern-night)
as plugin data and a frozen world view, for their unit tests."""

from __future__ import annotations

from types import MappingProxyType, SimpleNamespace

import yaml

from services.scheduler.execution.plugin_data_view import PluginDataView
from services.scheduler.function.runtime import FunctionContext
from shared.plugin_sdk import CancellationSignal
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.settings import REPO_ROOT

WORLD_DIR = REPO_ROOT / "tests" / "fixtures" / "stage-worlds" / "lantern-night"
WORLD_ID = "lantern-night"


def characters() -> list[dict]:
    """The world's characters as a session holds them (the `blueprint` field is the plugin's data)."""
    return [{k: v for k, v in c.items() if k != "blueprint"} | {"type": c.get("type", "npc")}
            for c in yaml.safe_load((WORLD_DIR / "characters.yaml").read_text())]


def blueprints() -> dict[str, dict]:
    return {c["id"]: c["blueprint"] for c in yaml.safe_load((WORLD_DIR / "characters.yaml").read_text()) if c.get("blueprint")}


def records(path: str) -> dict[str, dict]:
    return {r["id"]: r for r in yaml.safe_load((WORLD_DIR / path).read_text())}


def world_ctx(plugin_id: str, runtime_id: str, *, data: dict | None = None, inputs: dict | None = None, message: str = "",
              settings: dict | None = None, turn: int = 1, locale: str = "en") -> FunctionContext:
    committed = dict(data or {})

    async def load(namespace):
        return {k: v for k, v in committed.items() if namespace is None or k[0] == namespace}

    context = FunctionContext(
        runtime_id=runtime_id, plugin_id=plugin_id, inputs=MappingProxyType(inputs or {}), player_message=message, player_actions=(),
        logical_turn=turn, execution=MappingProxyType({"origin": "player", "locale": locale}), recursion_depth=0,
        random=SeededRandom("test"), plugin_data=PluginDataView(plugin_id, load), signal=CancellationSignal(),
        user_settings=MappingProxyType(settings or {}),
    )
    context.world = SimpleNamespace(characters=tuple(characters()), worldRecord={"id": WORLD_ID})
    return context


def writes_of(done) -> dict:
    """(namespace, key) -> the value a run set (None: deleted)."""
    found = {}
    for write in done.writes:
        payload = write["payload"]
        found[(payload["namespace"], payload["key"])] = payload.get("value")
    return found
