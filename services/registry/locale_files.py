"""Player-visible labels in other languages: `locales/<locale>.yaml`.

A locale file has one section per manifest file (`PLUGIN.md`, `runtimes/<id>/RUNTIME.md`)
that mirrors the manifest's structure but holds only label fields (displayName,
description, label, title, summary, about, placeholder). A list item names the manifest item it translates by
its identity (`key` for settings, `name` for commands and action kinds, `id` for prompt segments, `value` for
options: IDENTITY_FIELDS), and by its position only where it holds none; an identity that matches nothing is a
`locale-unknown-item`. The compiled map keys an entry by the manifest item's position.
and an optional `messages` section (English text -> translation) for UI specs and code.
An entry on any other field (a contract, a prompt, an id) is ignored at load and an error
in validation; so is a section for a file that does not exist. A label written in the main
manifest as an inline locale map (`displayName: {en: …, zh: …}`) is an error.

The compiled result is a locale map: {locale: {file: {field path: text}, "messages": {…}}}.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from services.registry.diagnostics import DiagnosticBag, Severity, format_path
from shared.bounded_yaml import load_yaml

LOCALES_DIR = "locales"
LABEL_FIELDS = frozenset({"displayName", "description", "label", "title", "summary", "about", "placeholder"})
# A list item is named by the first of these it holds (settings by key, commands by name, panels and prompt segments
# by id, action kinds by name, options by value); an item holding none is matched by its position.
IDENTITY_FIELDS = ("key", "name", "id", "value")
LOCALE_NAME = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
MESSAGES = "messages"


def inline_locale_maps(data: Any, bag: DiagnosticBag, *, file: str, path: tuple[str | int, ...] = ()) -> Any:
    """Replace `label: {en: …, zh: …}` by its English (or first) text, with an error at that path."""
    if isinstance(data, dict):
        result: dict[str, Any] = {}
        for key, value in data.items():
            here = (*path, key)
            if key in LABEL_FIELDS and isinstance(value, dict) and value and all(
                isinstance(locale, str) and LOCALE_NAME.match(locale) and isinstance(text, str) for locale, text in value.items()
            ):
                bag.error(
                    "inline-locale-map",
                    f"`{key}` is written as a locale map; the manifest holds the English text only",
                    file=file,
                    field_path=format_path(here),
                    hint=f"write the English text here and the translations in {LOCALES_DIR}/<locale>.yaml",
                )
                result[key] = value.get("en", next(iter(value.values())))
            else:
                result[key] = inline_locale_maps(value, bag, file=file, path=here)
        return result
    if isinstance(data, list):
        return [inline_locale_maps(item, bag, file=file, path=(*path, index)) for index, item in enumerate(data)]
    return data


def _walk(
    section: Any,
    manifest: Any,
    path: tuple[str | int, ...],
    out: dict[str, str],
    problems: list[tuple[str, str, str]],
) -> None:
    """Collect label translations; problems are (code, field path, message)."""
    if isinstance(section, dict):
        for key, value in section.items():
            here = (*path, str(key))
            target = manifest.get(key) if isinstance(manifest, dict) else None
            if isinstance(value, (dict, list)):
                if target is None:
                    problems.append(("locale-unknown-field", format_path(here), f"the manifest has no `{format_path(here)}`"))
                    continue
                _walk(value, target, here, out, problems)
            elif key not in LABEL_FIELDS:
                problems.append(
                    (
                        "locale-untranslatable-field",
                        format_path(here),
                        f"`{format_path(here)}` is not a player-visible label; locale files translate only "
                        + ", ".join(sorted(LABEL_FIELDS)),
                    )
                )
            elif not isinstance(value, str):
                problems.append(("locale-invalid-text", format_path(here), f"the translation of `{format_path(here)}` must be text"))
            elif target is None:
                problems.append(("locale-unknown-field", format_path(here), f"the manifest has no `{format_path(here)}`"))
            else:
                out[format_path(here)] = value
    elif isinstance(section, list):
        for index, item in enumerate(section):
            identity = _identity(item)
            if identity is None:
                position = (*path, index)
                target = manifest[index] if isinstance(manifest, list) and index < len(manifest) else None
                if target is None:
                    problems.append(("locale-unknown-field", format_path(position), f"the manifest has no `{format_path(position)}`"))
                    continue
                _walk(item, target, position, out, problems)
                continue
            field, value = identity
            found = _find_item(manifest, field, value)
            if found is None:
                where = format_path((*path, index))
                problems.append(("locale-unknown-item", where, f"`{format_path(path)}` has no item whose {field} is `{value}`"))
                continue
            _walk({k: v for k, v in item.items() if k != field}, manifest[found], (*path, found), out, problems)


def _identity(item: Any) -> tuple[str, str] | None:
    """(field, value) naming the manifest list item a locale entry translates, or None (matched by position)."""
    if not isinstance(item, dict):
        return None
    for field in IDENTITY_FIELDS:
        if isinstance(item.get(field), str):
            return field, item[field]
    return None


def _find_item(manifest: Any, field: str, value: str) -> int | None:
    if not isinstance(manifest, list):
        return None
    return next((index for index, entry in enumerate(manifest) if isinstance(entry, dict) and entry.get(field) == value), None)


def compile_locales(
    root: Path, manifests: dict[str, dict[str, Any]], bag: DiagnosticBag, *, strict: bool
) -> dict[str, dict[str, Any]]:
    """Read every locales/<locale>.yaml; `manifests` maps a manifest file to its frontmatter."""
    folder = root / LOCALES_DIR
    if not folder.is_dir() or folder.is_symlink():
        return {}
    ignored = Severity.ERROR if strict else Severity.WARNING
    compiled: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.iterdir(), key=lambda item: item.name):
        if path.suffix not in (".yaml", ".yml") or not path.is_file():
            continue
        file = f"{LOCALES_DIR}/{path.name}"
        locale = path.stem
        if not LOCALE_NAME.match(locale):
            bag.add(ignored, "locale-file-name", f"`{path.name}` is not named after a locale (e.g. zh.yaml)", file=file)
            continue
        try:
            data = load_yaml(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as error:
            bag.error("locale-yaml", f"the locale file is not valid YAML: {str(error).splitlines()[0]}", file=file)
            continue
        if data is None:
            continue
        if not isinstance(data, dict):
            bag.error("locale-not-mapping", "a locale file is a mapping of manifest files to their labels", file=file)
            continue
        result: dict[str, Any] = {}
        for section, content in data.items():
            section = str(section)
            if section == MESSAGES:
                if not isinstance(content, dict) or not all(isinstance(value, str) for value in content.values()):
                    bag.error("locale-invalid-text", "`messages` maps English text to its translation", file=file, field_path=MESSAGES)
                    continue
                result[MESSAGES] = {str(key): value for key, value in content.items()}
                continue
            if section not in manifests:
                bag.add(
                    ignored,
                    "locale-unknown-section",
                    f"`{section}` is not a manifest file of this package; its entries are ignored",
                    file=file,
                    field_path=section,
                    hint=f"sections are named after manifest files: {', '.join(sorted(manifests))}",
                )
                continue
            labels: dict[str, str] = {}
            problems: list[tuple[str, str, str]] = []
            _walk(content, manifests[section], (), labels, problems)
            for code, field_path, message in problems:
                bag.add(ignored, code, message + "; it is ignored", file=file, field_path=f"{section}.{field_path}")
            if labels:
                result[section] = labels
        if result:
            compiled[locale] = result
    return compiled
