"""A world's lorebook: `lorebook:` in world.yaml, inline or the path of a YAML file of the package (without
the field, `lorebook.yaml` when the package has one). Each entry is checked (LorebookDecl and the lorebook's
own rules: ids unique, keys or `constant`), and every session in the world starts with them, owner `world`."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from covel.store.v1 import store_pb2
from services.registry.diagnostics import DiagnosticBag, add_validation_errors
from services.registry.loaded_world import LoadedWorld
from services.registry.package_files import PackageFiles
from services.registry.world_files import listed_items
from services.registry.world_models import WORLD_FIELDS, LorebookDecl, WorldManifest
from shared.errors import ServiceError
from shared.lorebook import ENTRIES_MAX, check_entry
from shared.lorebook_keys import BadKey, regex_of
from shared.lorebook_rules import activation_to_proto

DEFAULT_LOREBOOK_FILE = "lorebook.yaml"
LOREBOOK_YAML_CODE = "lorebook-yaml"
LOREBOOK_NOT_LIST_CODE = "lorebook-not-list"


def read_lorebook(world: LoadedWorld, manifest: WorldManifest, files: PackageFiles, bag: DiagnosticBag) -> list[dict[str, Any]]:
    listed = listed_items(manifest.lorebook, "lorebook", DEFAULT_LOREBOOK_FILE, "entries", files, bag,
                          codes=(LOREBOOK_YAML_CODE, LOREBOOK_NOT_LIST_CODE))
    written, file, prefix = listed.items, listed.file, listed.prefix
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
        field, regex_error = regex_problem(entry)
        if field:
            bag.error("lorebook-regex-invalid", regex_error, file=file, field_path=f"{where}.{field}",
                      hint="write an RE2 pattern (no backreferences or lookaround), or a plain key")
            continue
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


def entry_to_proto(entry: dict[str, Any]) -> store_pb2.LorebookEntry:
    """A world entry as a session's lorebook holds it (owner world)."""
    return store_pb2.LorebookEntry(owner="world", id=entry["id"], title=entry.get("title", ""), keys=entry.get("keys", []),
                                   content=entry["content"], constant=bool(entry.get("constant")), disabled=bool(entry.get("disabled")),
                                   activation=activation_to_proto(entry.get("activation")))


def regex_problem(entry: dict[str, Any]) -> tuple[str, str]:
    """(field, problem) of the first key RE2 cannot compile, or ("", "")."""
    rules = entry.get("activation") or {}
    for field in ("keys", "secondaryKeys", "excludeKeys"):
        keys = entry.get(field, []) if field == "keys" else rules.get(field) or []
        for index, key in enumerate(keys):
            try:
                regex_of(key, bool(rules.get("useRegex")), bool(rules.get("caseSensitive")))
            except BadKey as problem:
                return (f"{field}[{index}]" if field == "keys" else f"activation.{field}[{index}]"), str(problem)
    return "", ""
