"""`covel import` of every card shape into a world package the registry's loader accepts, and `covel export`
back: import -> export -> import gives the same world, `extensions` and what had no place kept verbatim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from covel_cli.main import main
from services.registry.importing.card_export import card_charx, card_png, loaded_world, lorebook_json
from services.registry.importing.importer import import_bytes
from services.registry.loaded_world import LoadedWorld
from tests.importing import cards


def world_state(world: LoadedWorld) -> dict[str, Any]:
    """All a world is, as the registry loaded it (files' bytes for media)."""
    assert world.manifest is not None
    media = {item.path: (world.root_dir / item.path).read_bytes() for item in world.manifest.media or []}
    return {"manifest": world.manifest.model_dump(exclude_none=True), "characters": world.characters,
            "lorebook": world.lorebook, "media": media}


def test_a_v2_card_in_a_png_becomes_a_world(tmp_path: Path) -> None:
    world = import_bytes(cards.card_png(cards.v2_card(), keyword="chara"), tmp_path)
    manifest = world.manifest
    assert world.loaded and world.id == "lin-yao" and manifest is not None
    assert manifest.name == "Lin Yao" and manifest.description == "A storm coast where the lamps went dark."
    assert manifest.opening == "*She looks up.* You came back."
    assert [(o.id, o.text) for o in manifest.openings or []] == [("greeting-1", "Another night."), ("greeting-2", "The lamp is out, {{user}}.")]
    assert world.characters == [{"id": "lin-yao", "name": "Lin Yao", "type": "npc", "description": "A lighthouse keeper's daughter.",
                                 "personality": "stubborn, kind"}]
    by_id = {entry["id"]: entry for entry in world.lorebook}
    assert by_id["card.system-prompt"]["content"] == "Write as {{char}}." and by_id["card.system-prompt"]["constant"]
    assert by_id["card.character"]["content"] == ("Lin Yao: A lighthouse keeper's daughter.\nPersonality: stubborn, kind\n"
                                                  "Scenario: A storm coast where the lamps went dark.")
    assert by_id["card.post-history"]["activation"]["position"] == "atDepth" and by_id["card.post-history"]["activation"]["depth"] == 0
    harbor = by_id["entry-2"]["activation"]
    assert (harbor["position"], harbor["depth"], harbor["role"], harbor["selectiveLogic"], harbor["probability"]) == \
        ("atDepth", 2, "user", "notAny", 40)
    assert (harbor["secondaryKeys"], harbor["sticky"], harbor["cooldown"], harbor["group"]) == (["night"], 2, 1, "weather")
    assert by_id["entry-2"]["imported"]["extensions"] == {"display_index": 7, "vectorized": False}
    rain = by_id["entry-3"]
    assert rain["content"] == "Rain." and rain["constant"] and rain["disabled"]
    assert rain["activation"]["excludeKeys"] == ["calm", "quiet"] and rain["activation"]["role"] == "assistant"
    assert rain["imported"]["decorators"] == ["@@is_greeting 1"]
    assert "entry-4" not in by_id  # no keys and not constant: kept verbatim, not in the lorebook
    assert manifest.imported is not None
    kept = manifest.imported["card"]
    assert kept["extensions"] == {"talkativeness": "0.5", "depth_prompt": {"prompt": "x", "depth": 4}, "custom/thing": [1, 2]}
    assert kept["book"]["unused"][0]["content"] == "no keys, not constant" and kept["book"]["extensions"] == {"risu_x": 1}
    assert manifest.lorebookSettings is not None and (manifest.lorebookSettings.scanDepth, manifest.lorebookSettings.tokenBudget) == (3, 800)
    assert [(m.type, m.path) for m in manifest.media or []] == [("icon", "media/icon/main.png")]


def test_a_png_with_both_chunks_is_read_from_ccv3(tmp_path: Path) -> None:
    world = import_bytes(cards.card_png(cards.v3_card(), also_v2=cards.v2_card(name="Wrong one")), tmp_path)
    assert world.manifest is not None and world.manifest.name == "Lin Yao"
    assert world.characters[0]["aliases"] == ["Yao"]
    assert [(o.id, o.groupOnly) for o in world.manifest.openings or []][-1] == ("group-1", True)
    kept = world.manifest.imported["card"] if world.manifest.imported else {}
    assert kept["assets"] == [{"type": "background", "uri": "https://example.org/bg.png", "name": "bg", "ext": "png"}]
    assert kept["creator_notes_multilingual"] == {"zh": "温柔一点。"} and kept["creation_date"] == 1700000000


def test_an_apng_card(tmp_path: Path) -> None:
    frames = cards.chunk(b"acTL", b"\0\0\0\2\0\0\0\0") + cards.chunk(b"fcTL", bytes(26)) + cards.chunk(b"fdAT", b"\0\0\0\1xx")
    apng = cards.png(texts={"ccv3": cards.b64json(cards.v3_card())}, extra=frames)
    world = import_bytes(apng, tmp_path)
    assert world.loaded and world.manifest is not None and world.manifest.name == "Lin Yao"


def test_json_v1_and_charx_cards(tmp_path: Path) -> None:
    v1 = import_bytes(json.dumps(cards.v1_card()).encode(), tmp_path)
    assert v1.loaded and v1.manifest is not None and v1.manifest.opening == "Welcome, friend." and v1.characters[0]["name"] == "Old Tobin"
    card = cards.v3_card(assets=[{"type": "icon", "uri": "embeded://assets/icon/images/face.png", "name": "face", "ext": "png"},
                                 {"type": "emotion", "uri": "embeded://assets/emotion/images/joy.png", "name": "joy", "ext": "png"}])
    world = import_bytes(cards.charx(card, {"assets/icon/images/face.png": cards.png(3, 3),
                                            "assets/emotion/images/joy.png": cards.png(4, 4)}), tmp_path, "from-charx")
    assert world.manifest is not None
    assert [(m.type, m.name, m.path) for m in world.manifest.media or []] == [
        ("icon", "face", "media/icon/face.png"), ("emotion", "joy", "media/emotion/joy.png")]
    assert (tmp_path / "from-charx" / "media" / "emotion" / "joy.png").read_bytes() == cards.png(4, 4)


def test_standalone_lorebooks(tmp_path: Path) -> None:
    book = {"spec": "lorebook_v3", "data": {"name": "Tides", "scan_depth": 5, "entries": [cards.book_entry(9, ["tide"], "It turns at dusk.")]}}
    world = import_bytes(json.dumps(book).encode(), tmp_path)
    assert world.id == "tides" and [entry["id"] for entry in world.lorebook] == ["entry-9"]
    info = import_bytes(json.dumps(cards.world_info(3)).encode(), tmp_path, "info")
    first = info.lorebook[1]
    assert first["keys"] == ["word1", "/sto+rm/i"] and first["activation"]["excludeRecursion"] is True
    assert first["activation"]["position"] == "afterChar" and first["activation"]["delay"] == 1 and first["activation"]["order"] == 101
    assert first["imported"]["extensions"] == {"displayIndex": 1, "addMemo": True}
    assert first["activation"]["useRegex"] is False  # a plain World Info key stays plain; `/sto+rm/i` is a regex by its form


@pytest.mark.parametrize("shape", ["png", "charx"])
def test_round_trip_import_export_import_is_the_same_world(tmp_path: Path, shape: str) -> None:
    first = import_bytes(cards.card_png(cards.v3_card()), tmp_path / "a", "coast")
    card = card_png(first) if shape == "png" else card_charx(first)
    second = import_bytes(card, tmp_path / "b", "coast")
    assert world_state(second) == world_state(first)
    again = card_png(second) if shape == "png" else card_charx(second)
    assert world_state(import_bytes(again, tmp_path / "c", "coast")) == world_state(first)


def test_round_trip_keeps_data_uri_media_and_world_info(tmp_path: Path) -> None:
    card = cards.v3_card(assets=[{"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"},
                                 {"type": "emotion", "uri": "embeded://assets/emotion/images/joy.png", "name": "joy", "ext": "png"}])
    first = import_bytes(cards.charx(card, {"assets/emotion/images/joy.png": cards.png(4, 4),
                                            "assets/icon/images/main.png": cards.png(3, 3)}), tmp_path / "a", "w")
    png_card = card_png(first)  # the icon is the PNG itself, the emotion a data: URI
    assert b"data:image/png;base64," in __import__("base64").b64decode(cards_text(png_card, "ccv3"))
    second = import_bytes(png_card, tmp_path / "b", "w")
    assert world_state(second) == world_state(first)
    info = import_bytes(json.dumps(cards.world_info(4)).encode(), tmp_path / "a", "info")
    assert world_state(import_bytes(lorebook_json(info), tmp_path / "b", "info")) == world_state(info)


def cards_text(png: bytes, keyword: str) -> bytes:
    from services.registry.importing.png_text import read_png

    return read_png(png).texts[keyword]


def test_the_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "lin.png"
    source.write_bytes(cards.card_png(cards.v3_card()))
    worlds = tmp_path / "worlds"
    assert main(["import", str(source), "--worlds-dir", str(worlds), "--world", "coast"]) == 0
    assert "✓ coast" in capsys.readouterr().out
    assert yaml.safe_load((worlds / "coast" / "world.yaml").read_text())["name"] == "Lin Yao"
    assert main(["import", str(source), "--worlds-dir", str(worlds), "--world", "coast"]) == 1
    assert "already" in capsys.readouterr().err
    out = tmp_path / "out.charx"
    assert main(["export", "coast", "--worlds-dir", str(worlds), "--format", "charx", "-o", str(out)]) == 0
    assert main(["import", str(out), "--worlds-dir", str(worlds), "--world", "coast", "--replace"]) == 0
    assert world_state(loaded_world(worlds / "coast"))["manifest"]["name"] == "Lin Yao"
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    (unpacked / "card.json").write_text(json.dumps(cards.v1_card()))
    assert main(["import", str(unpacked), "--worlds-dir", str(worlds)]) == 0
    assert (worlds / "old-tobin" / "world.yaml").is_file()
