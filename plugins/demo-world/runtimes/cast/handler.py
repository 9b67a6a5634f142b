"""The cast of world.yaml into the world model, once per session (maxTriggerCount: 1)."""

from pathlib import Path

import yaml

WORLD_FILE = Path(__file__).resolve().parents[2] / "world.yaml"


def cast() -> list[dict]:
    data = yaml.safe_load(WORLD_FILE.read_text(encoding="utf-8")) or {}
    return [entry for entry in data.get("characters") or [] if isinstance(entry, dict) and entry.get("id") and entry.get("name")]


async def handler(ctx):
    present = {character["id"] for character in ctx.world.characters}
    added = []
    for entry in cast():
        if entry["id"] in present:
            continue
        character = {"name": entry["name"], "type": "npc", "description": entry.get("role", "")}
        if entry.get("aliases"):
            character["aliases"] = list(entry["aliases"])
        ctx.propose("character.upsert", {"characterId": entry["id"], "expectedVersion": 0, "character": character})
        added.append(entry["id"])
    return {"added": added}
