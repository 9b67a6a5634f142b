"""docs/worlds.md's "Import" tables, made from the mapping code itself (services/registry/importing/): where
each field of a card, of its character book and of a book entry goes in the world. A field the mapping learns
shows up here, and tests/docs/test_import_tables.py fails until the doc is rewritten."""

from __future__ import annotations

from services.registry.importing import book_mapping, card_mapping, limits

IMPORT_TABLES = ("card", "book", "entry", "entry-extensions", "decorators", "limits")


def import_table(name: str) -> str:
    if name == "card":
        rows = [(f"`data.{field}`", place) for field, place in card_mapping.CARD_FIELDS.items()]
        rows += [(f"`data.{field}`", "kept verbatim (`imported.card`)") for field in card_mapping.KEPT_VERBATIM]
        return _table(("card field", "in the world"), rows)
    if name == "book":
        return _table(("book field", "in the world"), [(f"`{field}`", place) for field, place in book_mapping.BOOK_FIELDS.items()])
    if name == "entry":
        return _table(("entry field", "in the world's entry"), [(f"`{field}`", place) for field, place in book_mapping.ENTRY_FIELDS.items()])
    if name == "entry-extensions":
        rows = [(f"`{card}` (`{info}`)" if card != info else f"`{card}`", place)
                for card, (info, place) in book_mapping.EXTENSION_FIELDS.items()]
        return _table(("`extensions` key (World Info's)", "in the world's entry"), rows)
    if name == "decorators":
        return _table(("decorator", "in the world's entry"), [(f"`@@{name}`", place) for name, place in book_mapping.DECORATORS.items()])
    if name == "limits":
        return _table(("bound", "value"), [(f"`{field}`", f"{getattr(limits, field):,}") for field in LIMIT_NAMES])
    raise KeyError(name)


LIMIT_NAMES = ("FILE_MAX", "JSON_MAX", "TEXT_CHUNK_MAX", "PNG_CHUNKS_MAX", "IMAGE_SIDE_MAX", "ZIP_MEMBERS_MAX", "ZIP_MEMBER_MAX",
               "ZIP_TOTAL_MAX", "ZIP_RATIO_MAX", "ASSETS_MAX", "JSON_DEPTH_MAX", "TEXT_FIELD_MAX")


def _table(header: tuple[str, str], rows: list[tuple[str, str]]) -> str:
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|", *(f"| {left} | {right} |" for left, right in rows)]
    return "\n".join(lines) + "\n"
