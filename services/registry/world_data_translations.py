"""Translations of a world's data files: `facts.zh.yaml` beside `facts.yaml` holds the texts of the same
records in Chinese, and a session in that language imports the records with them merged in.

A translation file has the base file's shape; its records are matched by the source's key. Inside a
record, objects merge by field, a text or a list of plain values replaces the base's, and a list of
objects matches its items to the base's by an identity field: the source's `key`, then `id`, then
the source's `localeArrayKeys` in order (the first that the translated item has). A record, field or
item the base file does not have is an error naming the translation file and field: a translation
only translates, it never adds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.registry.diagnostics import DiagnosticBag, format_path
from services.registry.loaded_world import WorldDataSource
from services.registry.world_references import Record

ReadFile = Callable[[str], list[tuple[str, Record]]]


def translated_records(source: WorldDataSource, records: list[tuple[str, Record]], read: ReadFile,
                       bag: DiagnosticBag) -> dict[str, list[tuple[str, Record]]]:
    """By locale, the source's records with that locale's translation files merged in (every record, translated or not)."""
    by_locale: dict[str, dict[str, Record]] = {}
    base_files = dict(source.translations)
    for base_file, translations in base_files.items():
        base = {key: record for key, record in records if record.file == base_file}
        for locale, relative in translations:
            translated = by_locale.setdefault(locale, {})
            for key, record in read(relative):
                if key not in base:
                    bag.error("data-translation-unknown", f"{base_file} has no record `{key}` to translate", file=relative,
                              field_path=format_path(record.location), hint="use a key of the translated file, or remove the record")
                    continue
                identity = (source.key or "id", "id", *source.locale_array_keys)
                merged = merge_texts(base[key].value, record.value, identity, _Where(bag, relative, record.location))
                translated[key] = Record(base[key].file, base[key].location, merged)
    return {locale: [(key, translated.get(key, record)) for key, record in records] for locale, translated in by_locale.items()}


class _Where:
    """Where a merge problem is reported: the translation file and the field's location in it."""

    def __init__(self, bag: DiagnosticBag, file: str, location: tuple[str | int, ...]) -> None:
        self.bag, self.file, self.location = bag, file, location

    def at(self, part: str | int) -> _Where:
        return _Where(self.bag, self.file, (*self.location, part))

    def error(self, code: str, message: str, hint: str) -> None:
        self.bag.error(code, message, file=self.file, field_path=format_path(self.location), hint=hint)


def merge_texts(base: Any, translated: Any, identity: tuple[str, ...], where: _Where) -> Any:
    """`base` with `translated`'s values over it (objects by field, lists of objects by identity field)."""
    if isinstance(base, dict) and isinstance(translated, dict):
        merged = dict(base)
        for name, value in translated.items():
            if name not in base:
                where.at(name).error("data-translation-unknown", f"the translated record has `{name}`, which the base record does not",
                                     "translate only the fields the base file writes")
                continue
            merged[name] = merge_texts(base[name], value, identity, where.at(name))
        return merged
    if isinstance(base, list) and isinstance(translated, list) and any(isinstance(item, dict) for item in base):
        return _merge_items(base, translated, identity, where)
    if isinstance(base, dict | list) != isinstance(translated, dict | list):
        where.error("data-translation-shape", f"the base file has a {type(base).__name__} here, the translation a {type(translated).__name__}",
                    "write the same shape as the base file")
        return base
    return translated


def _merge_items(base: list[Any], translated: list[Any], identity: tuple[str, ...], where: _Where) -> list[Any]:
    merged = list(base)
    for index, item in enumerate(translated):
        field = next((name for name in identity if isinstance(item, dict) and name in item), None)
        position = next((spot for spot, candidate in enumerate(base)
                         if field is not None and isinstance(candidate, dict) and candidate.get(field) == item[field]), None)
        if position is None:
            shown = f"no item of the base list has {field} = {item[field]!r}" if field else f"the item has none of {', '.join(identity)}"
            where.at(index).error("data-translation-unmatched", f"cannot match this item to the base file's: {shown}",
                                  "keep the identity field (the source's key, id, or one of localeArrayKeys) in every translated item")
            continue
        merged[position] = merge_texts(base[position], item, identity, where.at(index))
    return merged
