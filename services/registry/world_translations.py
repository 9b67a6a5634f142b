"""`world.<locale>.yaml`: a world's texts in another language, and the world as a session in that
language reads it.

A translation holds only texts, matched by id: name, description, opening, author.about and the
labels of author.links (by position), and the name / description of characters, attributes and
dimensions (characters may add aliases). An id world.yaml does not have is an error, so is a
translated link past the last one; author names, licences and ids are never translated.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import ValidationError

from services.registry.diagnostics import DiagnosticBag, add_validation_errors
from services.registry.loaded_world import LoadedWorld
from services.registry.package_files import PackageFiles
from services.registry.world_files import read_yaml_file
from services.registry.world_models import WORLD_FIELDS, Author, WorldManifest, WorldTranslation

TRANSLATION_FILE = re.compile(r"^world\.(?P<locale>[^.]+)\.yaml$")
LOCALE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")


def _translation(world: LoadedWorld, relative: str, files: PackageFiles, bag: DiagnosticBag) -> WorldTranslation | None:
    data = read_yaml_file(files, relative, bag, code="world-translation-yaml")
    if data is None:
        return None
    if not isinstance(data, dict):
        bag.error("world-not-mapping", f"{relative} is a {type(data).__name__}, not a mapping of texts", file=relative)
        return None
    try:
        translation = WorldTranslation.model_validate(data)
    except ValidationError as error:
        add_validation_errors(bag, error.errors(), data, file=relative, known_fields=WORLD_FIELDS)
        return None
    _check_ids(world, translation, relative, bag)
    return translation


def _check_ids(world: LoadedWorld, translation: WorldTranslation, relative: str, bag: DiagnosticBag) -> None:
    manifest = world.manifest
    assert manifest is not None
    known = {
        "characters": world.written_character_ids,
        "characterSchema.attributes": set((manifest.characterSchema.attributes or {}) if manifest.characterSchema else {}),
        "dimensions": set(manifest.dimensions or {}),
        "lorebook": {entry["id"] for entry in world.lorebook},
    }
    attributes = translation.characterSchema.attributes if translation.characterSchema else None
    written = {"characters": translation.characters, "characterSchema.attributes": attributes, "dimensions": translation.dimensions,
               "lorebook": translation.lorebook}
    for group, items in written.items():
        for item_id in items or {}:
            if item_id not in known[group]:
                bag.error("world-translation-unknown-id", f"world.yaml has no {group} entry `{item_id}` to translate", file=relative,
                          field_path=f"{group}.{item_id}", hint=f"use an id of world.yaml's {group}, or remove the entry")
    links = translation.author.links if translation.author else None
    author = world_author(world)
    written_links = (author.links or []) if author is not None else []
    if links and len(links) > len(written_links):
        bag.error("world-translation-unknown-id", "more link labels than world.yaml's author.links (they match by position)",
                  file=relative, field_path="author.links")


def world_author(world: LoadedWorld) -> Author | None:
    manifest = world.manifest
    return manifest.author if manifest is not None and isinstance(manifest.author, Author) else None


def read_translations(world: LoadedWorld, files: PackageFiles, bag: DiagnosticBag) -> dict[str, WorldTranslation]:
    """Every world.<locale>.yaml of the folder, by locale."""
    translations: dict[str, WorldTranslation] = {}
    for child in sorted(files.root.iterdir(), key=lambda item: item.name):
        match = TRANSLATION_FILE.match(child.name)
        if match is None:
            continue
        if not LOCALE.match(match.group("locale")):
            bag.error("world-translation-name", f"`{child.name}` is not named world.<locale>.yaml with a locale such as zh or pt-BR",
                      file=child.name, hint="rename it, e.g. world.zh.yaml")
            continue
        translation = _translation(world, child.name, files, bag)
        if translation is not None:
            translations[match.group("locale")] = translation
    return translations


def _named(item: dict[str, Any], translation: Any) -> None:
    if translation is None:
        return
    for key in ("name", "description"):
        text = getattr(translation, key, None)
        if text is not None:
            item[key] = text


def localized_characters(world: LoadedWorld, translation: WorldTranslation | None) -> list[dict[str, Any]]:
    characters = copy.deepcopy(world.characters)
    for character in characters:
        entry = (translation.characters or {}).get(character["id"]) if translation else None
        _named(character, entry)
        if entry is not None and entry.aliases:
            character["aliases"] = list(dict.fromkeys([*character.get("aliases", []), *entry.aliases]))
    return characters


def localized_lorebook(world: LoadedWorld, translation: WorldTranslation | None) -> list[dict[str, Any]]:
    """The world's lorebook with the translation's title, content and keys by entry id."""
    entries = copy.deepcopy(world.lorebook)
    for entry in entries:
        translated = (translation.lorebook or {}).get(entry["id"]) if translation else None
        for key in ("title", "content", "keys"):
            value = getattr(translated, key, None) if translated is not None else None
            if value is not None:
                entry[key] = value
    return entries


def localized_schema(world: LoadedWorld, translation: WorldTranslation | None) -> dict[str, Any] | None:
    schema = copy.deepcopy(world.character_schema)
    attributes = translation.characterSchema.attributes if translation and translation.characterSchema else None
    if schema is not None:
        for attribute_id, decl in schema["attributes"].items():
            _named(decl, (attributes or {}).get(attribute_id))
    return schema


def localized_texts(manifest: WorldManifest, translation: WorldTranslation | None) -> dict[str, Any]:
    """name, description, opening and author in the translation's language (world.yaml's where it has none)."""
    author: Any = manifest.author.model_dump(exclude_none=True) if isinstance(manifest.author, Author) else (
        {"name": manifest.author} if manifest.author else {})
    texts = {"name": manifest.name, "description": manifest.description or "", "opening": manifest.opening or "", "author": author}
    if translation is None:
        return texts
    for key in ("name", "description", "opening"):
        if getattr(translation, key) is not None:
            texts[key] = getattr(translation, key)
    if translation.author is not None:
        if translation.author.about is not None:
            author["about"] = translation.author.about
        for link, label in zip(author.get("links") or [], translation.author.links or [], strict=False):
            link["label"] = label.label
    return texts
