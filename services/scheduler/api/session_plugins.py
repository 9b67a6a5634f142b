"""Turning plugins on and off in a running session (SetSessionPlugins): the player's requests and exclusions
change, and the session's set is resolved again by the same resolver as at CreateSession (with the
world's required contracts as the world package says them now). The next turn runs the new set; a turn
running now keeps the set its lease found.
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.errors import invalid_argument

MAX_CHANGES = 64


def check_changes(request: scheduler_pb2.SetSessionPluginsRequest) -> None:
    if not request.enable and not request.disable:
        raise invalid_argument("enable", "name at least one plugin to enable or disable")
    for field in ("enable", "disable"):
        values = list(getattr(request, field))
        if len(values) > MAX_CHANGES:
            raise invalid_argument(field, f"names {len(values)} plugins; at most {MAX_CHANGES} at once")
        for index, plugin_id in enumerate(values):
            if not plugin_id.strip() or len(plugin_id) > 200:
                raise invalid_argument(f"{field}[{index}]", "must be a plugin id")
    both = set(request.enable) & set(request.disable)
    if both:
        raise invalid_argument("disable", f"{sorted(both)[0]!r} is also in enable; name a plugin in one list")


def changed_requests(session: store_pb2.Session, request: scheduler_pb2.SetSessionPluginsRequest) -> tuple[list[str], list[str]]:
    """(requested, excluded) after the change: enabled plugins become requests and leave the exclusions; disabled
    ones leave the requests and become exclusions."""
    disabled, enabled = set(request.disable), set(request.enable)
    requested = [p for p in dict.fromkeys([*session.requested_plugins, *request.enable]) if p not in disabled]
    excluded = [p for p in dict.fromkeys([*session.excluded_plugins, *request.disable]) if p not in enabled]
    return requested, excluded


async def required_contracts(registry: registry_pb2_grpc.PluginRegistryStub, session: store_pb2.Session) -> list[str]:
    """The world's pluginPolicy.requires (none for a session without a world, or a world no longer there)."""
    if not session.world_id:
        return []
    try:
        world = (await registry.GetWorld(registry_pb2.GetWorldRequest(world_id=session.world_id))).world
    except grpc.aio.AioRpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            return []  # a world removed since: its requirements go with it
        raise
    return list(world.plugin_policy.requires)


async def store_plugins(store: store_pb2_grpc.TransactionalStoreStub, session_id: str, requested: list[str], excluded: list[str],
                        resolved: registry_pb2.ResolveSessionPluginsResponse) -> store_pb2.Session:
    reply = await store.UpdateSessionPlugins(store_pb2.UpdateSessionPluginsRequest(
        session_id=session_id, active_plugins=list(resolved.session_plugins), requested_plugins=requested, excluded_plugins=excluded))
    return reply.session


def refuse_rejected_requests(requested: Iterable[str], resolved: registry_pb2.ResolveSessionPluginsResponse, *,
                             field: str = "requested_plugins") -> None:
    """A requested plugin rejected for anything but a missing dependency (those stay, unavailable):
    a conflict, not installed, failed to load, fails the create naming it (spec: plugin_rejected)."""
    kept = set(resolved.session_plugins)
    why = {r.plugin_id: r for r in resolved.rejected if r.plugin_id not in kept}
    for index, plugin_id in enumerate(requested):
        if plugin_id in why:
            rejection = why[plugin_id]
            remedy = "exclude the plugin it conflicts with or drop" if "conflict" in rejection.code else "drop"
            raise invalid_argument(
                f"{field}[{index}]",
                f"plugin_rejected: plugin {plugin_id!r} cannot join this session ({rejection.code}): {rejection.reason};"
                f" {remedy} it from {field}",
            )
