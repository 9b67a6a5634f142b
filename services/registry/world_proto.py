"""Loaded worlds as `covel.registry.v1.World` messages, in the language a caller asks for."""

from __future__ import annotations

import grpc

from covel.registry.v1 import registry_pb2
from services.registry.loaded_world import LoadedWorld
from services.registry.world_translations import localized_characters, localized_lorebook, localized_schema, localized_texts
from shared.errors import FieldViolation, ServiceError
from shared.lorebook_rules import activation_to_proto, settings_to_proto
from shared.structs import to_struct, to_value


def unknown_world(world_id: str) -> ServiceError:
    """NOT_FOUND naming the field; the world folders are the host's business, so no path is named."""
    return ServiceError(grpc.StatusCode.NOT_FOUND, f"no world `{world_id}`; ListWorlds lists the worlds there are",
                        [FieldViolation("world_id", f"`{world_id}` is not the id of a world in the catalogue")])


def _translation_locale(world: LoadedWorld, locale: str) -> str:
    """The translation to use for `locale`: its own, else its language's (`zh` for `zh-CN`); "" for none."""
    if locale in world.translations:
        return locale
    language = locale.split("-", 1)[0]
    return language if language in world.translations else ""


def world_to_proto(world: LoadedWorld, locale: str = "", *, summary: bool = False) -> registry_pb2.World:
    message = registry_pb2.World(
        id=world.id,
        state=registry_pb2.WORLD_STATE_LOADED if world.loaded else registry_pb2.WORLD_STATE_FAILED,
        diagnostics=[diagnostic.to_proto() for diagnostic in world.diagnostics],
        locales=sorted(world.translations),
        missing_plugins=world.missing_plugins,
    )
    manifest = world.manifest
    if manifest is None:
        return message
    used = _translation_locale(world, locale)
    translation = world.translations.get(used) if used else None
    texts = localized_texts(manifest, translation)
    message.locale, message.name, message.description = used, texts["name"], texts["description"]
    message.version, message.license, message.homepage = manifest.version or "", manifest.license or "", manifest.homepage or ""
    if texts["author"]:
        message.author.CopyFrom(to_struct(texts["author"]))
    if summary:
        return message
    message.opening = texts["opening"]
    schema = localized_schema(world, translation)
    if schema is not None:
        message.character_schema.CopyFrom(to_struct(schema))
    message.characters.extend(to_struct(character) for character in localized_characters(world, translation))
    message.lorebook.extend(registry_pb2.WorldLorebookEntry(id=e["id"], title=e.get("title", ""), keys=e.get("keys", []), content=e["content"],
                                                            constant=bool(e.get("constant")), disabled=bool(e.get("disabled")),
                                                            activation=activation_to_proto(e.get("activation")))
                            for e in localized_lorebook(world, translation))
    settings = settings_to_proto(manifest.lorebookSettings.model_dump()) if manifest.lorebookSettings is not None else None
    if settings is not None:
        message.lorebook_settings.CopyFrom(settings)
    message.openings.extend(registry_pb2.WorldOpening(id=o.id, text=o.text, group_only=o.groupOnly) for o in manifest.openings or [])
    names = (translation.dimensions or {}) if translation else {}
    for dimension in world.dimensions:
        named = names.get(dimension.id)
        message.dimensions.append(registry_pb2.WorldDimension(
            id=dimension.id, name=(named.name if named and named.name else dimension.name),
            description=(named.description if named and named.description else dimension.description),
            schema=to_struct(dimension.schema), initial=to_value(dimension.initial),
        ))
    policy = manifest.pluginPolicy
    if policy is not None:
        message.plugin_policy.CopyFrom(registry_pb2.WorldPluginPolicy(
            preset=policy.preset or "", plus=policy.plus or [], requires=policy.requires or []))
    for plugin_id, values in (manifest.pluginSettings or {}).items():
        message.plugin_settings[plugin_id].CopyFrom(to_struct(values))
    message.data.extend(
        registry_pb2.WorldDataSource(contract=source.contract, visibility=source.visibility, kind=source.kind, key=source.key,
                                     files=source.files, character_field=source.character_field,
                                     locale_array_keys=source.locale_array_keys)
        for source in world.data_sources
    )
    return message
