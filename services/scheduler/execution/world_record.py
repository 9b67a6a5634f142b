"""ctx.world.worldRecord: the session's world as the registry holds it, in the session's locale (its name, texts,
character schema and cast, dimension definitions with their initial values, plugin policy, lorebook), read once
per turn (from the scheduler's plugin cache, which keeps it per catalogue generation). Not the world's state now: current values are ctx.world.dimensions and ctx.world.characters. The
registry's own bookkeeping (load state, diagnostics, missing plugins) is left out. None in a session without a world;
`{id}` alone when the registry no longer has it."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.hooks.bus import ExecutionScope

LEFT_OUT = ("state", "diagnostics", "missingPlugins")


def world_record(world: registry_pb2.World) -> dict[str, Any]:
    record = MessageToDict(world)
    return {name: value for name, value in record.items() if name not in LEFT_OUT}


async def read_world_record(registry: registry_pb2_grpc.PluginRegistryStub | None, scope: ExecutionScope,
                            shared: TurnShared) -> dict[str, Any] | None:
    world_id = scope.session.world_id
    if not world_id:
        return None
    if registry is None:
        return {"id": world_id}

    async def read() -> dict[str, Any]:
        if shared.worlds is not None:
            served = await shared.worlds(world_id, scope.session.locale)
            return world_record(served) if served is not None else {"id": world_id}
        try:
            reply = await registry.GetWorld(registry_pb2.GetWorldRequest(world_id=world_id, locale=scope.session.locale))
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                raise
            return {"id": world_id}
        return world_record(reply.world)

    return await shared.read_once("world-record", read)
