"""Plugin cards (spec: the preparation page): each installed plugin as a player sees it before a session starts —
name and description in the player's language, tags (derived `cost:*` / `ui:*` ones included), author, license and
homepage, whether it tells the story, and its diagnostics sorted into tasks that do not run and fields that were not
read, each with the file and field it names (paths relative to the plugin's folder)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from covel.registry.v1 import registry_pb2
from services.registry.diagnostics import Diagnostic, Severity
from services.registry.loaded_package import LoadedPackage
from shared.structs import to_struct

# Codes of a runtime (a task) the loader dropped: it will not run (docs/plugins.md, diagnostic codes).
UNRUNNABLE_CODES = frozenset(
    {"runtime-manifest-missing", "runtime-manifest-case", "stage-missing", "background-turn-input", "handler-missing"}
)
# Codes of what the loader read past: a field, key, file or translation that has no effect.
IGNORED_CODES = frozenset(
    {
        "unknown-field",
        "misspelled-field",
        "unknown-key",
        "ignored-file",
        "runtime-symlink-ignored",
        "locale-unknown-section",
        "locale-unknown-field",
        "locale-untranslatable-field",
        "locale-unknown-item",
    }
)


def _texts(package: LoadedPackage, locale: str) -> tuple[str, str]:
    """displayName and description in `locale` where PLUGIN.<locale>.md translates them."""
    translated = ((package.definition.get("locales") or {}).get(locale) or {}).get("PLUGIN.md") or {}
    return (
        str(translated.get("displayName") or package.display_name or package.id),
        str(translated.get("description") or package.description),
    )


def _author(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str) and value.strip():
        return {"name": value}
    if isinstance(value, dict) and value:
        return value
    return None


def sorted_diagnostics(package: LoadedPackage) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """(unrunnable, ignored): a failed package's errors count as unrunnable (nothing of it runs)."""
    unrunnable = [
        d for d in package.diagnostics if d.code in UNRUNNABLE_CODES or (not package.loaded and d.severity is Severity.ERROR)
    ]
    ignored = [d for d in package.diagnostics if d.code in IGNORED_CODES and d not in unrunnable]
    return unrunnable, ignored


def plugin_card(package: LoadedPackage, locale: str) -> registry_pb2.PluginCard:
    name, description = _texts(package, locale)
    definition = package.definition
    author = _author(definition.get("author"))
    unrunnable, ignored = sorted_diagnostics(package)
    return registry_pb2.PluginCard(
        id=package.id,
        name=name,
        description=description,
        kind=package.kind,
        source=package.source,
        version=package.version,
        tags=package.tags,
        provides=package.provides,
        requires=package.requires,
        story=any(runtime.visibility == "story" for runtime in package.runtimes),
        author=to_struct(author) if author else None,
        license=str(definition.get("license") or ""),
        homepage=str(definition.get("homepage") or ""),
        unrunnable=[d.to_proto() for d in unrunnable],
        ignored=[d.to_proto() for d in ignored],
        loaded=package.loaded,
    )


def plugin_cards(packages: Iterable[LoadedPackage], locale: str) -> list[registry_pb2.PluginCard]:
    return [plugin_card(package, locale) for package in sorted(packages, key=lambda package: package.id)]
