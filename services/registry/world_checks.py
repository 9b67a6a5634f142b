"""A world's own consistency: characters against the character schema, dimensions against their
schemas, and the plugin policy and settings presets against the installed plugins."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from jsonschema.exceptions import SchemaError

from services.registry.diagnostics import DiagnosticBag
from services.registry.loaded_package import LoadedPackage
from services.registry.loaded_world import WORLD_FILE, LoadedWorld, WorldDimension
from services.registry.package_files import PackageFiles
from services.registry.packs import Packs
from services.registry.world_models import DEFAULT_CHARACTER_TYPES, PLAYER_TYPE, AttributeDecl, WorldManifest
from shared import json_schemas
from shared.plugin_settings import declared_settings, value_problem


def check_world(world: LoadedWorld, manifest: WorldManifest, files: PackageFiles, bag: DiagnosticBag,
                packages: Mapping[str, LoadedPackage], packs: Packs) -> None:
    world.character_schema = _character_schema(manifest)
    _check_characters(world, manifest, bag)
    world.dimensions = _dimensions(manifest, files, bag)
    _check_plugin_policy(world, manifest, bag, packages, packs)
    _check_settings_presets(manifest, bag, packages)
    _check_media_and_openings(manifest, files, bag)


def _check_media_and_openings(manifest: WorldManifest, files: PackageFiles, bag: DiagnosticBag) -> None:
    """Each `media[].path` a file inside the package; opening ids unique."""
    for index, media in enumerate(manifest.media or []):
        relative = files.relative(WORLD_FILE, media.path)
        if relative is None or not files.is_file(relative):
            bag.error("media-missing", f"media `{media.path}` is not a file of the package", field_path=f"media[{index}].path",
                      hint="write the path of a file inside the world package")
    seen: set[str] = set()
    for index, opening in enumerate(manifest.openings or []):
        if opening.id in seen:
            bag.error("duplicate-opening", f"opening `{opening.id}` is written twice", field_path=f"openings[{index}].id",
                      hint="give each opening its own id")
        seen.add(opening.id)


def _character_schema(manifest: WorldManifest) -> dict[str, Any] | None:
    """As the store keeps it: {types, attributes}; `player` is always a type (a reserved one)."""
    schema = manifest.characterSchema
    if schema is None:
        return None
    types = list(dict.fromkeys([PLAYER_TYPE, *(schema.types or DEFAULT_CHARACTER_TYPES)]))
    attributes = {key: decl.model_dump(exclude_none=True) for key, decl in (schema.attributes or {}).items()}
    return {"types": types, "attributes": attributes}


def attribute_problem(decl: AttributeDecl, value: Any) -> str:
    """What is wrong with a character's value of this attribute ("" when nothing is)."""
    is_number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if decl.type == "string" and not isinstance(value, str):
        return f"must be text, not {value!r}"
    if decl.type == "boolean" and not isinstance(value, bool):
        return f"must be true or false, not {value!r}"
    if decl.type == "list" and not (isinstance(value, list) and all(isinstance(item, str | int | float) for item in value)):
        return f"must be a list of texts or numbers, not {value!r}"
    if decl.type in ("number", "integer"):
        if not is_number or (decl.type == "integer" and not float(value).is_integer()):
            return f"must be {'a whole number' if decl.type == 'integer' else 'a number'}, not {value!r}"
        if (decl.min is not None and value < decl.min) or (decl.max is not None and value > decl.max):
            return f"must be within {decl.min if decl.min is not None else '…'}..{decl.max if decl.max is not None else '…'}, not {value}"
    if decl.options is not None and value not in decl.options:
        return f"must be one of {', '.join(map(str, decl.options))}, not {value!r}"
    return ""


def _check_characters(world: LoadedWorld, manifest: WorldManifest, bag: DiagnosticBag) -> None:
    """Types and attribute values against characterSchema (nothing to check without one)."""
    schema = manifest.characterSchema
    if schema is None:
        return
    attributes = schema.attributes or {}
    for attribute_id, decl in attributes.items():
        problem = attribute_problem(decl, decl.default) if decl.default is not None else ""
        if problem:
            bag.error("attribute-invalid", f"the default {problem}", field_path=f"characterSchema.attributes.{attribute_id}.default")
    types = world.character_schema["types"] if world.character_schema else []
    prefix = f"{world.characters_prefix}" if world.characters_prefix else ""
    for index, character in enumerate(world.characters):
        where = f"{prefix}[{index}]"
        if character["type"] not in types:
            bag.error("unknown-character-type", f"type `{character['type']}` is not one of characterSchema.types ({', '.join(types)})",
                      file=world.characters_file, field_path=f"{where}.type", hint="add the type to characterSchema.types, or use one of them")
        for attribute_id, value in (character.get("attributes") or {}).items():
            declared = attributes.get(attribute_id)
            if declared is None:
                bag.error("unknown-attribute", f"`{attribute_id}` is not an attribute of characterSchema.attributes",
                          file=world.characters_file, field_path=f"{where}.attributes.{attribute_id}",
                          hint=f"declare it in characterSchema.attributes, or use one of: {', '.join(attributes) or 'none declared'}")
                continue
            problem = attribute_problem(declared, value)
            if problem:
                bag.error("attribute-invalid", f"`{attribute_id}` {problem}", file=world.characters_file,
                          field_path=f"{where}.attributes.{attribute_id}")


def _dimensions(manifest: WorldManifest, files: PackageFiles, bag: DiagnosticBag) -> list[WorldDimension]:
    """Each dimension's schema (inline or a JSON file of the package) compiled, its initial value checked."""
    dimensions = []
    for dimension_id, decl in (manifest.dimensions or {}).items():
        where = f"dimensions.{dimension_id}"
        schema: Any = decl.schema_
        if isinstance(schema, str):
            _, schema = files.json_file(schema, bag, file=WORLD_FILE, field_path=f"{where}.schema", what="dimension schema",
                                        require_object=True)
            if schema is None:
                continue
        try:
            validator = json_schemas.checked_validator(schema)
        except (SchemaError, json_schemas.PatternError) as error:
            bag.error("dimension-schema-invalid", f"the schema is not a valid JSON Schema: {getattr(error, 'message', error)}",
                      field_path=f"{where}.schema")
            continue
        errors = sorted(validator.iter_errors(decl.initial), key=lambda item: list(item.absolute_path))
        if errors:
            shown = "; ".join(item.message for item in errors[:3])
            bag.error("dimension-initial-invalid", f"the initial value does not match the schema: {shown}", field_path=f"{where}.initial",
                      hint="change the initial value or the schema")
            continue
        dimensions.append(WorldDimension(dimension_id, decl.name, decl.description or "", schema, decl.initial))
    return dimensions


def _check_plugin_policy(world: LoadedWorld, manifest: WorldManifest, bag: DiagnosticBag, packages: Mapping[str, LoadedPackage],
                         packs: Packs) -> None:
    policy = manifest.pluginPolicy
    if policy is None:
        return
    if policy.preset is not None and packs.get(policy.preset) is None:
        known = ", ".join(sorted(packs.by_id)) or "none"
        bag.warning("world-pack-missing", f"preset `{policy.preset}` is no pack of this kernel (its packs: {known}); it adds no plugins",
                    field_path="pluginPolicy.preset", hint="name a pack ListPacks lists, or list the plugins in pluginPolicy.plus")
    for index, plugin_id in enumerate(policy.plus or []):
        package = packages.get(plugin_id)
        if package is None or not package.loaded:
            world.missing_plugins.append(plugin_id)
            state = "is not installed" if package is None else "failed to load"
            bag.warning("world-plugin-missing", f"plugin `{plugin_id}` {state}; sessions in this world start without it",
                        field_path=f"pluginPolicy.plus[{index}]", hint="install the plugin, or remove it from plus")


def _check_settings_presets(manifest: WorldManifest, bag: DiagnosticBag, packages: Mapping[str, LoadedPackage]) -> None:
    """pluginSettings against each installed plugin's contributes.settings (the same rules as a player's values)."""
    for plugin_id, values in (manifest.pluginSettings or {}).items():
        package = packages.get(plugin_id)
        if package is None or not package.loaded:
            bag.warning("world-plugin-missing", f"settings for plugin `{plugin_id}`, which is not installed (or failed to load), are not used",
                        field_path=f"pluginSettings.{plugin_id}")
            continue
        declared = declared_settings(package.definition) or {}
        for key, value in values.items():
            where = f"pluginSettings.{plugin_id}.{key}"
            if key not in declared:
                bag.error("world-setting-invalid", f"plugin {plugin_id} has no setting `{key}` (it declares: {', '.join(sorted(declared)) or 'none'})",
                          field_path=where, hint="remove it or fix its name")
                continue
            problem = value_problem(declared[key], value)
            if problem:
                bag.error("world-setting-invalid", problem, field_path=where)
