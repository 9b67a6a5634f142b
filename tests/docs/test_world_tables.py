"""docs/worlds.md's field tables are the world package models' (covel_cli/world_doc_tables.py)."""

from __future__ import annotations

import pytest

from covel_cli import doc_tables, table_cells, world_doc_tables
from shared.settings import REPO_ROOT

WORLDS_DOC = REPO_ROOT / "docs" / "worlds.md"


def test_every_world_model_has_its_table_and_it_is_up_to_date() -> None:
    documented = doc_tables.blocks_in(WORLDS_DOC.read_text(encoding="utf-8"))
    for name in world_doc_tables.WORLD_MODELS:
        key = f"world-fields:{name}"
        assert key in documented, f"docs/worlds.md has no `<!-- generated: {key} -->` block"
        assert documented[key] == doc_tables.generated(key), f"docs/worlds.md: table {key} is out of date: run {doc_tables.WRITE_COMMAND}"
    assert WORLDS_DOC in doc_tables.WORLD_DOC_FILES, "doc_tables --write must rewrite docs/worlds.md too"


def test_every_world_field_appears_as_the_author_writes_it() -> None:
    documented = doc_tables.blocks_in(WORLDS_DOC.read_text(encoding="utf-8"))
    for name, (model, _) in world_doc_tables.WORLD_MODELS.items():
        for field_name, info in model.model_fields.items():
            assert f"| `{info.alias or field_name}` |" in documented[f"world-fields:{name}"], f"{name}.{info.alias or field_name}"


def test_a_world_field_without_a_meaning_fails_naming_it(monkeypatch) -> None:
    monkeypatch.delitem(world_doc_tables.WORLD_MEANINGS, "DimensionDecl.initial")
    with pytest.raises(table_cells.MissingMeaning, match="DimensionDecl.initial"):
        doc_tables.generated("world-fields:DimensionDecl")
