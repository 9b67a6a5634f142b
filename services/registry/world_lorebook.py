"""A world's lorebook: `lorebook:` in world.yaml, inline or the path of a YAML file of the package (without
the field, `lorebook.yaml` when the package has one). Each entry is checked (LorebookDecl and the lorebook's
own rules: ids unique, keys or `constant`), and every session in the world starts with them, owner `world`."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from covel.store.v1 import store_pb2
from services.registry.diagnostics import DiagnosticBag, add_validation_errors
from services.registry.package_files import PackageFiles
from services.registry.world_loader import WORLD_FILE, LoadedWorld, read_yaml_file
from services.registry.world_models import WORLD_FIELDS, LorebookDecl, WorldManifest
from shared.errors import ServiceError
from shared.lorebook import ENTRIES_MAX, check_entry

DEFAULT_LOREBOOK_FILE = "lorebook.yaml"


def read_lorebook(world: LoadedWorld, manifest: WorldManifest, files: PackageFiles, bag: DiagnosticBag) -> list[dict[str, Any]]:
    written, file, prefix = _written(manifest, files, bag)
    entries: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    if len(written) > ENTRIES_MAX:
        bag.error("lorebook-too-large", f"the lorebook has {len(written)} entries; a session holds at most {ENTRIES_MAX}", file=file)
        return []
    for index, raw in enumerate(written):
        where = f"{prefix}[{index}]" if prefix else f"[{index}]"
        try:
            decl = LorebookDecl.model_validate(raw)
        except ValidationError as error:
            add_validation_errors(bag, error.errors(), raw, file=file, prefix=where, known_fields=WORLD_FIELDS)
            continue
        if decl.id in seen:
            bag.error("duplicate-lorebook-entry", f"lorebook entry `{decl.id}` is also [{seen[decl.id]}]", file=file,
                      field_path=f"{where}.id", hint="give each entry its own id")
            continue
        entry = decl.model_dump(exclude_none=True)
        try:
            check_entry(entry_to_proto(entry))
        except ServiceError as problem:
            field = problem.violations[0].field if problem.violations else "id"
            bag.error("lorebook-entry-invalid", problem.message, file=file, field_path=f"{where}.{field}",
                      hint="give it keys that bring it into a story, or `constant: true`")
            continue
        seen[decl.id] = index
        entries.append(entry)
    return entries


def _written(manifest: WorldManifest, files: PackageFiles, bag: DiagnosticBag) -> tuple[list[Any], str, str]:
    """(the entries as written, the file they are in, their field path prefix there)."""
    if isinstance(manifest.lorebook, list):
        return manifest.lorebook, WORLD_FILE, "lorebook"
    if manifest.lorebook is None and not files.is_file(DEFAULT_LOREBOOK_FILE):
        return [], WORLD_FILE, "lorebook"
    relative = DEFAULT_LOREBOOK_FILE if manifest.lorebook is None else files.relative(WORLD_FILE, manifest.lorebook)
    if relative is None:
        bag.error("file-outside-package", f"the lorebook file `{manifest.lorebook}` points outside the world package",
                  field_path="lorebook", hint="write a path inside the package, e.g. ./lorebook.yaml")
        return [], WORLD_FILE, "lorebook"
    data = read_yaml_file(files, relative, bag, code="lorebook-yaml", referred_from=(WORLD_FILE, "lorebook"))
    if isinstance(data, dict) and isinstance(data.get("lorebook"), list):
        return data["lorebook"], relative, "lorebook"
    if data is None or isinstance(data, list):
        return data or [], relative, ""
    bag.error("lorebook-not-list", f"{relative} holds a {type(data).__name__}; write a list of entries (or `lorebook: [...]`)", file=relative)
    return [], relative, ""


def entry_to_proto(entry: dict[str, Any]) -> store_pb2.LorebookEntry:
    """A world entry as a session's lorebook holds it (owner world)."""
    return store_pb2.LorebookEntry(owner="world", id=entry["id"], title=entry.get("title", ""), keys=entry.get("keys", []),
                                   content=entry["content"], constant=bool(entry.get("constant")))
