"""A character card's fields to a world package, and the table of where each goes (CARD_FIELDS; docs/worlds.md
"Import" is made from it). What has no place in a world is kept verbatim in world.yaml's `imported.card`, and
`covel export` (card_export.py) gives it back."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from services.registry.importing.book_mapping import book_to_world, world_info_entries
from services.registry.importing.card_source import WORLD_INFO, ImportSource
from services.registry.importing.limits import TEXT_FIELD_MAX, refused
from services.registry.importing.media import card_media
from shared.lorebook import CONTENT_MAX, ENTRIES_MAX

# A card's `data` field -> where the world keeps it.
CARD_FIELDS: dict[str, str] = {
    "name": "the world's `name` and its character's `name`",
    "nickname": "the character's `aliases`",
    "description": "the character's `description`, and in the constant lorebook entry `card.character`",
    "personality": "the character's `personality`, and in `card.character`",
    "scenario": "the world's `description`, and in `card.character`",
    "first_mes": "the world's `opening`",
    "alternate_greetings": "`openings[]` (`greeting-<n>`), offered at a session's start",
    "group_only_greetings": "`openings[]` (`group-<n>`, `groupOnly: true`)",
    "system_prompt": "the constant lorebook entry `card.system-prompt` (before the character)",
    "post_history_instructions": "the constant lorebook entry `card.post-history` (at depth 0, after the history)",
    "character_book": "`lorebook` and `lorebookSettings` (see the book's table)",
    "assets": "files under `media/<type>/` listed in `media[]` (`ccdefault:`, `embeded://`, `data:`); remote URIs kept verbatim",
    "creator": "`author`",
    "character_version": "`version`",
}
KEPT_VERBATIM = ("mes_example", "creator_notes", "creator_notes_multilingual", "tags", "extensions", "source",
                 "creation_date", "modification_date")
SYSTEM_PROMPT_ID, POST_HISTORY_ID, CHARACTER_ID = "card.system-prompt", "card.post-history", "card.character"
# Made from the card's other fields at each import (so the story knows whom it plays), never exported.
DERIVED_ENTRIES = frozenset({CHARACTER_ID})
FIRST_ORDER, LAST_ORDER = -100_000, 100_000


@dataclass
class ImportedWorld:
    """A world package to write: world.yaml's fields, and the media files by path."""

    manifest: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)


def world_id_of(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.casefold()).strip("-")[:60].strip("-")
    return slug if slug and slug[0].isalnum() else "imported-world"


def source_to_world(source: ImportSource) -> ImportedWorld:
    if source.kind == "lorebook":
        return _lorebook_world(source)
    data = source.data
    name = _text(data, "name", required=True)[:120]
    manifest: dict[str, Any] = {"name": name}
    for card_name, world_name in (("scenario", "description"), ("creator", "author"), ("character_version", "version"),
                                  ("first_mes", "opening")):
        if _text(data, card_name):
            manifest[world_name] = _bounded(data, card_name, 20_000)
    openings = _openings(data)
    if openings:
        manifest["openings"] = openings
    manifest["characters"] = [_character(data, name)]
    kept: dict[str, Any] = {name: data[name] for name in KEPT_VERBATIM if data.get(name) not in (None, "", [], {})}
    lorebook = _prompt_entries(data) + _character_entry(data, name) + _card_book(data, manifest, kept)
    if len(lorebook) > ENTRIES_MAX:
        raise refused("data.character_book.entries", f"with the card's system prompt and post-history instructions makes {len(lorebook)} "
                                                     f"lorebook entries; a world holds at most {ENTRIES_MAX}")
    if lorebook:
        manifest["lorebook"] = lorebook
    media, files, kept_assets = card_media(source)
    if media:
        manifest["media"] = media
    if kept_assets:
        kept["assets"] = kept_assets
    if kept:
        manifest["imported"] = {"card": kept}
    return ImportedWorld(manifest, files)


def _character(data: dict[str, Any], name: str) -> dict[str, Any]:
    character: dict[str, Any] = {"id": world_id_of(name), "name": name}
    if _text(data, "nickname"):
        character["aliases"] = [_text(data, "nickname")[:120]]
    for card_name in ("description", "personality"):
        if _text(data, card_name):
            character[card_name] = _bounded(data, card_name, 20_000)
    return character


def _card_book(data: dict[str, Any], manifest: dict[str, Any], kept: dict[str, Any]) -> list[dict[str, Any]]:
    book = data.get("character_book")
    if book is None:
        return []
    if not isinstance(book, dict):
        raise refused("data.character_book", "is not an object")
    entries = book.get("entries")
    if not isinstance(entries, list):
        entries = _bad_entries(book, "data.character_book")
    lorebook, settings, book_kept = book_to_world(book, entries, "data.character_book")
    if settings:
        manifest["lorebookSettings"] = settings
    if book_kept:
        kept["book"] = book_kept
    return lorebook


def _lorebook_world(source: ImportSource) -> ImportedWorld:
    book = source.data
    entries = world_info_entries(book) if source.spec == WORLD_INFO else book.get("entries")
    if not isinstance(entries, list):
        entries = _bad_entries(book, "data")
    lorebook, settings, kept = book_to_world(book, entries, "data" if source.spec != WORLD_INFO else "")
    name = str(book.get("name") or "Imported lorebook")[:120]
    if kept.get("name") == name:
        del kept["name"]  # it is the world's name
    manifest: dict[str, Any] = {"name": name, "lorebook": lorebook}
    if settings:
        manifest["lorebookSettings"] = settings
    if kept:
        manifest["imported"] = {"book": kept}
    return ImportedWorld(manifest)


def _bad_entries(book: dict[str, Any], where: str) -> list[Any]:
    raise refused(f"{where}.entries" if where else "entries", "must be a list of entries")


def _openings(data: dict[str, Any]) -> list[dict[str, Any]]:
    openings = []
    for card_name, prefix, group_only in (("alternate_greetings", "greeting", False), ("group_only_greetings", "group", True)):
        greetings = data.get(card_name) or []
        if not isinstance(greetings, list) or not all(isinstance(text, str) for text in greetings):
            raise refused(f"data.{card_name}", "is not a list of texts")
        if len(greetings) > 32:
            raise refused(f"data.{card_name}", f"holds {len(greetings)} greetings; at most 32")
        for number, text in enumerate(greetings, 1):
            if len(text) > 20_000:
                raise refused(f"data.{card_name}[{number - 1}]", "is longer than 20000 characters")
            if text.strip():
                openings.append({"id": f"{prefix}-{number}", "text": text, **({"groupOnly": True} if group_only else {})})
    return openings


def _prompt_entries(data: dict[str, Any]) -> list[dict[str, Any]]:
    entries = []
    for card_name, entry_id, activation in (("system_prompt", SYSTEM_PROMPT_ID, {"order": FIRST_ORDER}),
                                            ("post_history_instructions", POST_HISTORY_ID,
                                             {"order": LAST_ORDER, "position": "atDepth", "depth": 0})):
        text = _text(data, card_name)
        if text.strip():
            if len(text) > CONTENT_MAX:
                raise refused(f"data.{card_name}", f"is {len(text)} characters; a prompt the world keeps holds at most {CONTENT_MAX}")
            entries.append({"id": entry_id, "title": card_name, "content": text, "constant": True, "activation": activation})
    return entries


def _character_entry(data: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The card's character as the story's prompt sees it, before the rest of the lore."""
    lines = [f"{name}: {_text(data, 'description')}".strip().rstrip(":")]
    for card_name, label in (("personality", "Personality"), ("scenario", "Scenario")):
        if _text(data, card_name).strip():
            lines.append(f"{label}: {_text(data, card_name)}")
    content = "\n".join(lines)
    if len(lines) == 1 and not _text(data, "description").strip():
        return []
    if len(content) > CONTENT_MAX:
        raise refused("data.description", f"with the personality and scenario is {len(content)} characters; the story's view of the "
                                          f"character holds at most {CONTENT_MAX}")
    return [{"id": CHARACTER_ID, "title": "character", "content": content, "constant": True, "activation": {"order": FIRST_ORDER + 1}}]


def _text(data: dict[str, Any], name: str, required: bool = False) -> str:
    value = data.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise refused(f"data.{name}", "must be a text" + (" that is not empty" if required else ""))
    if len(value) > TEXT_FIELD_MAX:
        raise refused(f"data.{name}", f"is {len(value)} characters; at most {TEXT_FIELD_MAX}")
    return value


def _bounded(data: dict[str, Any], name: str, most: int) -> str:
    value = _text(data, name)
    if len(value) > most:
        raise refused(f"data.{name}", f"is {len(value)} characters; a world keeps at most {most} here")
    return value
