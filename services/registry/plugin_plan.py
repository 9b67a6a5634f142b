"""The plugin plan of a session in a world (spec: plugin-plan): the initial requests (the pack's `requested`
then the world's `plus`, installed ones only), what the pack recommends and excludes, what was asked
for but is not installed, and the set the session resolver makes of it. CreateSession(world_id) starts
from the same plan, so what a player saw before is what the session gets.

The pack is the world's `pluginPolicy.preset`, or another one the player picked (`pack_id`): switching
packs replaces the pack's requests; the world's `plus` stays as a request. An exclusion wins over every request
(the pack's `excluded` over the world's `plus` too; the player can turn the plugin on again), and a plugin that is
not installed is not listed among the exclusions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from covel.registry.v1 import registry_pb2
from services.registry.loaded_package import LoadedPackage
from services.registry.loaded_world import LoadedWorld
from services.registry.packs import Pack, Packs
from services.registry.proto_mapping import resolution_to_proto
from services.registry.session_resolution import Resolution, resolve_session_plugins


@dataclass(frozen=True)
class MissingPlugin:
    plugin_id: str
    # "pack:<id>" or "world".
    source: str
    reason: str


@dataclass
class PluginPlan:
    pack: Pack | None
    pack_requested: list[str] = field(default_factory=list)
    world_plus: list[str] = field(default_factory=list)
    recommended: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    default_plugin_ids: list[str] = field(default_factory=list)
    required_contracts: list[str] = field(default_factory=list)
    missing: list[MissingPlugin] = field(default_factory=list)
    resolution: Resolution = field(default_factory=Resolution)


class UnknownPack(LookupError):
    """A pack id the catalogue has no pack for."""


def plugin_plan(world: LoadedWorld, packs: Packs, packages: Sequence[LoadedPackage], *, pack_id: str = "",
                approved: Sequence[str] | None = None, by_hand: tuple[list[str], list[str]] | None = None) -> PluginPlan:
    """`by_hand`: a set the player changed by hand, (requested, excluded), in place of the pack's and the world's."""
    policy = world.manifest.pluginPolicy if world.manifest is not None else None
    chosen = pack_id or (policy.preset if policy is not None and policy.preset else "")
    pack = packs.get(chosen) if chosen else None
    if pack_id and pack is None:
        raise UnknownPack(pack_id)
    installed = {package.id for package in packages if package.loaded}
    plan = PluginPlan(pack=pack, required_contracts=list(policy.requires or []) if policy is not None else [])
    sources = ((f"pack:{pack.id}", pack.decl.requested) if pack is not None else ("", []), ("world", policy.plus or [] if policy else []))
    for (source, wanted), kept in zip(sources, (plan.pack_requested, plan.world_plus), strict=True):
        for plugin_id in dict.fromkeys(wanted):
            if plugin_id in installed:
                kept.append(plugin_id)
            else:
                plan.missing.append(MissingPlugin(plugin_id, source, "not installed, or failed to load"))
    plan.default_plugin_ids = list(dict.fromkeys([*plan.pack_requested, *plan.world_plus]))
    if pack is not None:
        plan.excluded = [p for p in dict.fromkeys(pack.decl.excluded) if p in installed]
        plan.recommended = [p for p in dict.fromkeys(pack.decl.recommended)
                            if p in installed and p not in plan.default_plugin_ids and p not in plan.excluded]
    if by_hand is not None:
        _chosen_by_hand(plan, by_hand, installed)
    plan.resolution = resolve_session_plugins(packages, plan.default_plugin_ids, plan.excluded, approved=approved,
                                              required_contracts=plan.required_contracts)
    return plan


def _chosen_by_hand(plan: PluginPlan, by_hand: tuple[list[str], list[str]], installed: set[str]) -> None:
    """The player's own set replaces the pack's and the world's requests and exclusions (not installed: missing)."""
    requested, excluded = by_hand
    plan.missing = [MissingPlugin(p, "player", "not installed, or failed to load") for p in dict.fromkeys(requested) if p not in installed]
    plan.default_plugin_ids = [p for p in dict.fromkeys(requested) if p in installed]
    plan.excluded = [p for p in dict.fromkeys(excluded) if p in installed]
    plan.recommended = [p for p in plan.recommended if p not in plan.default_plugin_ids and p not in plan.excluded]


def pack_to_proto(pack: Pack, locale: str, installed: set[str]) -> registry_pb2.Pack:
    name, description = pack.texts(locale)
    decl = pack.decl
    return registry_pb2.Pack(id=pack.id, name=name, description=description, requested=decl.requested, recommended=decl.recommended,
                             excluded=decl.excluded, default_view_mode=decl.defaultViewMode or "",
                             missing=[p for p in dict.fromkeys([*decl.requested, *decl.recommended]) if p not in installed])


def plan_to_proto(plan: PluginPlan, locale: str, installed: set[str], generation: int) -> registry_pb2.PluginPlan:
    message = registry_pb2.PluginPlan(
        default_plugin_ids=plan.default_plugin_ids, pack_requested=plan.pack_requested, world_plus=plan.world_plus,
        recommended=plan.recommended, excluded=plan.excluded, required_contracts=plan.required_contracts,
        missing=[registry_pb2.MissingPlugin(plugin_id=m.plugin_id, source=m.source, reason=m.reason) for m in plan.missing],
        resolution=resolution_to_proto(plan.resolution, generation),
    )
    if plan.pack is not None:
        message.pack.CopyFrom(pack_to_proto(plan.pack, locale, installed))
    return message
