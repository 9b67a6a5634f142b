"""docs/worlds.md's "Import" tables are the mapping code's (covel_cli/import_doc_tables.py), and they change when it does."""

from __future__ import annotations

from covel_cli import doc_tables, import_doc_tables
from services.registry.importing import book_mapping, card_mapping
from shared.settings import REPO_ROOT

WORLDS_DOC = REPO_ROOT / "docs" / "worlds.md"


def test_every_import_table_is_in_the_doc_and_up_to_date() -> None:
    documented = doc_tables.blocks_in(WORLDS_DOC.read_text(encoding="utf-8"))
    for name in import_doc_tables.IMPORT_TABLES:
        key = f"import:{name}"
        assert key in documented, f"docs/worlds.md has no `<!-- generated: {key} -->` block"
        assert documented[key] == doc_tables.generated(key), f"docs/worlds.md: {key} is out of date: run {doc_tables.WRITE_COMMAND}"


def test_the_tables_follow_the_mapping(monkeypatch) -> None:
    monkeypatch.setitem(card_mapping.CARD_FIELDS, "new_field", "somewhere new")
    monkeypatch.setitem(book_mapping.DECORATORS, "new_decorator", "`activation.new`")
    assert "| `data.new_field` | somewhere new |" in doc_tables.generated("import:card")
    assert "| `@@new_decorator` |" in doc_tables.generated("import:decorators")
    documented = doc_tables.blocks_in(WORLDS_DOC.read_text(encoding="utf-8"))
    assert documented["import:card"] != doc_tables.generated("import:card")


def test_every_card_field_the_mapping_reads_is_in_a_table() -> None:
    card = doc_tables.generated("import:card")
    for field in ("name", "first_mes", "alternate_greetings", "system_prompt", "character_book", "assets", "extensions", "mes_example"):
        assert f"`data.{field}`" in card, field
    assert "`exclude_recursion` (`excludeRecursion`)" in doc_tables.generated("import:entry-extensions")
