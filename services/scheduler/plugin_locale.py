"""A running plugin's translations (locales/<locale>.yaml, compiled by the registry): its manifest labels by
field path and its `messages` (English text -> translation) for UI specs, in a session's locale.

A locale `zh-Hans` falls back to `zh`; a label with no translation keeps the manifest's English.
"""

from __future__ import annotations

from typing import Any

MESSAGES = "messages"


def _locale_map(package: Any, locale: str) -> dict[str, Any]:
    definition = getattr(package, "definition", None)
    locales = (definition.locales or {}) if definition is not None else {}
    if not locale:
        return {}
    return locales.get(locale) or locales.get(locale.split("-")[0]) or {}


def labels(package: Any, locale: str, file: str = "PLUGIN.md") -> dict[str, str]:
    """field path (`contributes.commands[0].label`) -> its translation, for one manifest file."""
    found = _locale_map(package, locale).get(file)
    return found if isinstance(found, dict) else {}


def messages(package: Any, locale: str) -> dict[str, str]:
    """English text -> its translation, for UI specs and code."""
    found = _locale_map(package, locale).get(MESSAGES)
    return found if isinstance(found, dict) else {}


def translate_texts(value: Any, translations: dict[str, str]) -> Any:
    """`value` with every string that is a whole English message replaced by its translation (keys kept)."""
    if not translations:
        return value
    if isinstance(value, str):
        return translations.get(value, value)
    if isinstance(value, list):
        return [translate_texts(item, translations) for item in value]
    if isinstance(value, dict):
        return {key: translate_texts(item, translations) if key not in _NOT_TEXT else item for key, item in value.items()}
    return value


# Fields of a UI spec that are names, not texts.
_NOT_TEXT = frozenset({"id", "type", "icon", "group", "statePath", "namespace", "src", "sandbox", "tone"})
