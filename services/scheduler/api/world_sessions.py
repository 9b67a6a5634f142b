"""A session in a world (CreateSession's world_id): what the registry's world package says the session
starts with, turned into the create request's parts (docs/worlds.md). No client reads a file.

- the world's `pluginPolicy.plus` joins the requested plugins (those not installed are left out and
  reported), `requires` the required contracts;
- its `pluginSettings` presets are the settings under the player's own (a player's value wins);
- its character schema, characters, dimensions (at their initial values) and opening are written
  with the session, in one transaction (the store's SessionWorld), by the writer `world:<id>`;
- its data, for the plugins that run in the session (import_world_data), in the same transaction.

An unknown world is NOT_FOUND naming world_id; a world that failed to load is FAILED_PRECONDITION
with its first diagnostics. Either way nothing is created.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from google.protobuf import struct_pb2

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2
from services.scheduler.execution.dataset_policies import policies_of
from services.scheduler.plugin_cache import PluginCache
from shared.card_macros import expand
from shared.errors import FieldViolation, ServiceError, failed_precondition, invalid_argument
from shared.plugin_sdk.seeded_random import seeded_random
from shared.structs import from_struct, to_struct

SHOWN_DIAGNOSTICS = 3


@dataclass
class WorldStart:
    """The parts of a new session that come from its world."""

    world: registry_pb2.World
    # The player's request with the world's plugins, contracts, settings presets and title.
    request: scheduler_pb2.CreateSessionRequest
    session_world: store_pb2.SessionWorld
    left_out: list[registry_pb2.RejectedPlugin] = field(default_factory=list)


async def import_world_data(registry: registry_pb2_grpc.PluginRegistryStub, plugins: PluginCache, start: WorldStart,
                            running: list[str], locale: str) -> None:
    """The world's data for the session's running plugins (hidden data too) into the session's world, with the
    dataset rules of the receiving plugins: the store writes and checks them in the session's transaction."""
    reply = await registry.GetWorldImport(registry_pb2.GetWorldImportRequest(world_id=start.world.id, plugin_ids=running, locale=locale))
    start.session_world.plugin_data.extend(
        store_pb2.PluginDataEntry(plugin_id=record.plugin_id, namespace=record.namespace, key=record.key, value=record.value)
        for record in reply.records
    )
    receivers = sorted({record.plugin_id for record in reply.records})
    if receivers:
        start.session_world.datasets.extend(policies_of(await plugins.packages(receivers, timeout_s=10)))


def default_seats(world: registry_pb2.World | None) -> list[store_pb2.Seat]:
    """One player seat, "main", bound to the world's player characters and playing the first of them."""
    players = [str(from_struct(character).get("id")) for character in (world.characters if world is not None else [])
               if from_struct(character).get("type") == "player"]
    return [store_pb2.Seat(id="main", role="player", character_id=players[0] if players else "", character_ids=players)]


def _diagnostic_line(diagnostic: common_pb2.Diagnostic) -> str:
    where = diagnostic.file + (f":{diagnostic.field_path}" if diagnostic.field_path else "")
    return f"{where}: {diagnostic.code} {diagnostic.message}"


async def fetch_world(registry: registry_pb2_grpc.PluginRegistryStub, world_id: str, locale: str) -> registry_pb2.World:
    """GetWorld, with the registry's NOT_FOUND passed on naming the request's world_id."""
    try:
        return (await registry.GetWorld(registry_pb2.GetWorldRequest(world_id=world_id, locale=locale))).world
    except grpc.aio.AioRpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            raise ServiceError(grpc.StatusCode.NOT_FOUND, f"no world `{world_id}`; ListWorlds lists the worlds a session can start in",
                               [FieldViolation("world_id", f"`{world_id}` is not a world of the catalogue")]) from None
        raise


def _loaded(world: registry_pb2.World) -> None:
    if world.state == registry_pb2.WORLD_STATE_LOADED:
        return
    errors = [d for d in world.diagnostics if d.severity == common_pb2.SEVERITY_ERROR]
    shown = "; ".join(_diagnostic_line(d) for d in (errors or list(world.diagnostics))[:SHOWN_DIAGNOSTICS])
    more = len(errors) - SHOWN_DIAGNOSTICS
    raise failed_precondition(
        f"world `{world.id}` failed to load, so no session starts in it: {shown}" + (f" (and {more} more)" if more > 0 else "")
        + "; fix the world package (covel validate-world shows every problem) and reload the registry",
        reason="WORLD_FAILED", subject=f"worlds/{world.id}",
    )


def opening_text(world: registry_pb2.World, opening_id: str) -> str:
    """The opening a new session starts with: the world's `opening`, or the one of its `openings` the request names."""
    if not opening_id:
        return world.opening
    for opening in world.openings:
        if opening.id == opening_id:
            return opening.text
    known = ", ".join(opening.id for opening in world.openings) or "none besides its opening"
    raise invalid_argument("opening_id", f"world `{world.id}` has no opening `{opening_id[:80]}` (it has: {known})")


def expanded_opening(world: registry_pb2.World, text: str) -> str:
    """An opening with its card macros expanded (`{{char}}` the first character not a player's, `{{user}}` the
    player's, draws from the world's seeded random), as the lorebook's are (shared/card_macros.py)."""
    characters = [from_struct(character) for character in world.characters]
    char = next((str(c.get("name", "")) for c in characters if c.get("type") != "player" and c.get("name")), "")
    user = next((str(c.get("name", "")) for c in characters if c.get("type") == "player" and c.get("name")), "you")
    return expand(text, char, user, seeded_random(0, "framework:opening", world.id).float)


def _session_world(world: registry_pb2.World, opening_id: str = "") -> store_pb2.SessionWorld:
    writer = f"world:{world.id}"
    started = store_pb2.SessionWorld(opening=expanded_opening(world, opening_text(world, opening_id)), writer=writer)
    if world.HasField("character_schema"):
        started.character_schema.CopyFrom(world.character_schema)
    for character in world.characters:
        data = from_struct(character)
        character_id = str(data.pop("id", ""))
        started.characters.append(store_pb2.Character(id=character_id, data=to_struct(data)))
    started.lorebook.extend(
        store_pb2.LorebookEntry(owner="world", id=e.id, title=e.title, keys=list(e.keys), content=e.content, constant=e.constant,
                                disabled=e.disabled, activation=e.activation)
        for e in world.lorebook
    )
    if world.HasField("lorebook_settings"):
        started.lorebook_settings.CopyFrom(world.lorebook_settings)
    started.dimensions.extend(
        store_pb2.Dimension(id=d.id, name=d.name, description=d.description, schema=d.schema, value=d.initial, owner_plugin_id=writer)
        for d in world.dimensions
    )
    return started


def _settings(world: registry_pb2.World, request: scheduler_pb2.CreateSessionRequest) -> dict[str, struct_pb2.Struct]:
    """The world's presets with the player's values over them, key by key."""
    merged = {plugin_id: from_struct(values) for plugin_id, values in world.plugin_settings.items()}
    for plugin_id, values in request.plugin_settings.items():
        merged.setdefault(plugin_id, {}).update(from_struct(values))
    return {plugin_id: to_struct(values) for plugin_id, values in merged.items()}


async def world_start(registry: registry_pb2_grpc.PluginRegistryStub, request: scheduler_pb2.CreateSessionRequest,
                      locale: str) -> WorldStart | None:
    """None for a session without a world; raises (nothing created) for an unknown or failed world, or an unknown pack."""
    if not request.world_id:
        return None
    world = await fetch_world(registry, request.world_id, locale)
    _loaded(world)
    plan = (await registry.GetPluginPlan(registry_pb2.GetPluginPlanRequest(
        world_id=world.id, pack_id=request.pack_id, locale=locale, approved=list(request.approved_plugins)))).plan
    player_excluded = set(request.excluded_plugins)
    wanted = [plugin_id for plugin_id in plan.default_plugin_ids if plugin_id not in player_excluded]
    left_out = [
        registry_pb2.RejectedPlugin(plugin_id=missing.plugin_id, code="not-installed",
                                     reason=f"{_asker(missing.source, world.id)} asks for it, but it is not installed or failed to load")
        for missing in plan.missing
    ]
    combined = scheduler_pb2.CreateSessionRequest()
    combined.CopyFrom(request)
    combined.title = request.title or world.name
    del combined.requested_plugins[:], combined.required_contracts[:], combined.excluded_plugins[:]
    combined.requested_plugins.extend(dict.fromkeys([*wanted, *request.requested_plugins]))
    # The pack's exclusions, unless the player asks for the plugin; the player's own exclusions always.
    pack_excluded = [plugin_id for plugin_id in plan.excluded if plugin_id not in request.requested_plugins]
    combined.excluded_plugins.extend(dict.fromkeys([*request.excluded_plugins, *pack_excluded]))
    combined.required_contracts.extend(dict.fromkeys([*plan.required_contracts, *request.required_contracts]))
    combined.plugin_settings.clear()
    for plugin_id, values in _settings(world, request).items():
        combined.plugin_settings[plugin_id].CopyFrom(values)
    return WorldStart(world=world, request=combined, session_world=_session_world(world, request.opening_id), left_out=left_out)


def _asker(source: str, world_id: str) -> str:
    return f"pack {source.removeprefix('pack:')} of world {world_id}" if source.startswith("pack:") else f"world {world_id}"
