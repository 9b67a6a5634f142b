"""Importing into an existing world (`covel import <file> --world <id> --merge`, services/registry/importing/world_merge.py):
the world keeps its own fields and files and gains the file's lorebook entries, characters and openings; the same
file merged again replaces what it brought instead of doubling it; a world that is not there, or no --world, is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from covel_cli.main import main
from services.registry.world_loader import load_world as loaded_world
from shared.settings import REPO_ROOT
from tests.importing import cards


def test_a_lorebook_and_a_card_merge_into_a_hand_written_world(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    worlds = tmp_path / "worlds"
    worlds.mkdir()
    shutil.copytree(REPO_ROOT / "worlds" / "demo-world", worlds / "demo-world")
    before = loaded_world(worlds / "demo-world")
    book, card = tmp_path / "book.json", tmp_path / "lin.json"
    book.write_text(json.dumps(cards.world_info(3)), encoding="utf-8")
    card.write_text(json.dumps(cards.v3_card()), encoding="utf-8")

    assert main(["import", str(book), "--worlds-dir", str(worlds), "--world", "demo-world", "--merge"]) == 0, (
        capsys.readouterr().err
    )
    assert main(["import", str(card), "--worlds-dir", str(worlds), "--world", "demo-world", "--merge"]) == 0, (
        capsys.readouterr().err
    )
    merged = loaded_world(worlds / "demo-world")
    assert merged.manifest is not None and before.manifest is not None
    assert (merged.manifest.name, merged.manifest.opening) == (before.manifest.name, before.manifest.opening), (
        "the world's own fields stay"
    )
    kept = {entry["id"] for entry in before.lorebook}
    ids = [entry["id"] for entry in merged.lorebook]
    assert kept < set(ids) and len(ids) == len(set(ids))
    added = set(ids) - kept
    assert {"entry-0", "entry-1", "entry-2"} <= added and "card.character" in added
    assert [c["id"] for c in merged.characters][-1] == "lin-yao" and len(merged.characters) == len(before.characters) + 1
    assert {o.id for o in merged.manifest.openings or []} >= {"greeting-1", "greeting-2"}
    original = {
        p.relative_to(REPO_ROOT / "worlds" / "demo-world")
        for p in (REPO_ROOT / "worlds" / "demo-world").rglob("*")
        if p.is_file()
    }
    now = {p.relative_to(worlds / "demo-world") for p in (worlds / "demo-world").rglob("*") if p.is_file()}
    assert original <= now, "its files stay"

    assert main(["import", str(book), "--worlds-dir", str(worlds), "--world", "demo-world", "--merge"]) == 0
    again = loaded_world(worlds / "demo-world")
    assert [entry["id"] for entry in again.lorebook] == ids, "merged again: replaced, not doubled"
    assert yaml.safe_load((worlds / "demo-world" / "world.yaml").read_text())["name"] == before.manifest.name


def test_a_merge_needs_a_world_that_is_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    book = tmp_path / "book.json"
    book.write_text(json.dumps(cards.world_info(1)), encoding="utf-8")
    worlds = tmp_path / "worlds"
    assert main(["import", str(book), "--worlds-dir", str(worlds), "--merge"]) == 2
    assert "--merge needs --world" in capsys.readouterr().err
    worlds.mkdir()
    assert main(["import", str(book), "--worlds-dir", str(worlds), "--world", "nowhere", "--merge"]) == 1
    assert "no world `nowhere`" in capsys.readouterr().err
    assert list(worlds.iterdir()) == [], "nothing is left behind"
