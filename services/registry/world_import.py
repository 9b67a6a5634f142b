"""What a new session in a world imports from the world's data (docs/worlds.md, "Data sources").

Each source's records go to every namespace of the session's plugins that accepts the source's
contract (`contributes.data.<namespace>.accepts`), `_hidden.<namespace>` for a hidden source; the
kernel names no plugin. The records were read and checked when the registry scanned the world
(world_data.check_records), so an import reads no file: a world whose data does not fit its
receivers failed to load, and no session starts in it. In the session's language, a data file's
translation is merged in (world_data_translations.py). Sources apply in order: a later record
with the same (plugin, namespace, key) replaces an earlier one, as a second set would.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from services.registry.loaded_package import LoadedPackage
from services.registry.loaded_world import LoadedWorld
from services.registry.world_data import HIDDEN_PREFIX, receivers


@dataclass(frozen=True)
class ImportedRecord:
    plugin_id: str
    namespace: str
    key: str
    value: Any
    source: str


def import_records(world: LoadedWorld, packages: Sequence[LoadedPackage], plugin_ids: Collection[str],
                   locale: str = "") -> list[ImportedRecord]:
    running = [package for package in packages if package.id in plugin_ids]
    localized = {source.where: records for source, records in world.translated_records.get(locale, [])}
    imported: dict[tuple[str, str, str], ImportedRecord] = {}
    for source, records in world.records:
        records = localized.get(source.where, records)
        for plugin_id, namespace, _ in receivers(source.contract, running):
            stored = HIDDEN_PREFIX + namespace if source.visibility == "hidden" else namespace
            for key, record in records:
                imported.pop((plugin_id, stored, key), None)  # a replaced record moves to where it is set again
                imported[(plugin_id, stored, key)] = ImportedRecord(plugin_id, stored, key, record.value, source.where)
    return list(imported.values())
