"""Which plugins run in a new session (first version of the spec's resolveSessionPlugins).

active = core plugins + requested, minus excluded (excluded wins, also over core); a core
plugin that is a default provider steps back when a requested plugin provides the same
contract; every `requires` contract that no active plugin provides pulls in one loaded
provider (the one marked default, else the only one). A plugin whose requirement cannot
be met is rejected, and the providers it alone pulled in go with it. Active plugins are
listed in catalogue order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from services.registry.package_loader import LoadedPackage

NOT_FOUND = "not-found"
FAILED_TO_LOAD = "failed-to-load"
MISSING_PROVIDER = "missing-provider"
AMBIGUOUS_PROVIDER = "ambiguous-provider"
CONFLICT = "conflict"
SUPERSEDED = "superseded"


@dataclass(frozen=True)
class Rejection:
    plugin_id: str
    code: str
    reason: str
    contract: str = ""


@dataclass
class Resolution:
    active: list[str] = field(default_factory=list)
    auto_added: list[str] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


def _unique(ids: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    return [item for item in ids if not (item in seen or seen.add(item))]


def resolve_session_plugins(
    packages: Sequence[LoadedPackage], requested: Sequence[str], excluded: Sequence[str]
) -> Resolution:
    by_id = {package.id: package for package in packages}
    order = {package.id: index for index, package in enumerate(packages)}
    excluded_ids = set(excluded)
    rejected: dict[str, Rejection] = {}

    explicit: list[str] = []
    for plugin_id in _unique(requested):
        if plugin_id in excluded_ids:
            continue
        package = by_id.get(plugin_id)
        if package is None:
            rejected[plugin_id] = Rejection(plugin_id, NOT_FOUND, f"no plugin `{plugin_id}` is installed")
        elif not package.loaded:
            rejected[plugin_id] = Rejection(plugin_id, FAILED_TO_LOAD, _failure_reason(package))
        else:
            explicit.append(plugin_id)

    explicit_provides = {contract for plugin_id in explicit for contract in by_id[plugin_id].provides}
    core: list[str] = []
    for package in packages:
        if package.kind != "core" or package.id in excluded_ids or package.id in explicit:
            continue
        if not package.loaded:
            rejected[package.id] = Rejection(package.id, FAILED_TO_LOAD, _failure_reason(package))
            continue
        replaced = [contract for contract in package.default_provides if contract in explicit_provides]
        if replaced:
            by = next(pid for pid in explicit if replaced[0] in by_id[pid].provides)
            rejected[package.id] = Rejection(
                package.id,
                SUPERSEDED,
                f"the requested plugin `{by}` provides {replaced[0]}, of which `{package.id}` is only the default provider",
                replaced[0],
            )
            continue
        core.append(package.id)

    base = explicit + core
    while True:
        accepted = [plugin_id for plugin_id in base if plugin_id not in rejected]
        active = set(accepted)
        auto: list[str] = []
        new: dict[str, Rejection] = {}
        queue = list(accepted)
        while queue:
            plugin_id = queue.pop(0)
            for contract in by_id[plugin_id].requires:
                if any(contract in by_id[other].provides for other in active):
                    continue
                candidates = [
                    package
                    for package in packages
                    if package.loaded
                    and contract in package.provides
                    and package.id not in excluded_ids
                    and package.id not in rejected
                ]
                defaults = [package for package in candidates if contract in package.default_provides]
                pick = defaults if defaults else candidates
                if len(pick) == 1:
                    active.add(pick[0].id)
                    auto.append(pick[0].id)
                    queue.append(pick[0].id)
                    continue
                if pick:
                    names = ", ".join(package.id for package in pick)
                    new[plugin_id] = Rejection(
                        plugin_id,
                        AMBIGUOUS_PROVIDER,
                        f"{contract} is required and several plugins provide it ({names}); request one of them",
                        contract,
                    )
                else:
                    why = " (its providers are excluded)" if any(
                        contract in by_id[pid].provides for pid in excluded_ids if pid in by_id
                    ) else ""
                    new[plugin_id] = Rejection(
                        plugin_id, MISSING_PROVIDER, f"{contract} is required and no loaded plugin provides it{why}", contract
                    )
                break
        if not new:
            conflict = _first_conflict([*accepted, *auto], by_id)
            if conflict is None:
                break
            new[conflict.plugin_id] = conflict
        rejected.update(new)

    return Resolution(
        active=sorted(active, key=order.__getitem__),
        auto_added=sorted(auto, key=order.__getitem__),
        rejected=list(rejected.values()),
    )


def _first_conflict(accepted: Sequence[str], by_id: dict[str, LoadedPackage]) -> Rejection | None:
    """Conflicting plugins: the one accepted later (explicit before core before auto) is rejected."""
    for index, later in enumerate(accepted):
        for earlier in accepted[:index]:
            for first, second in ((earlier, later), (later, earlier)):
                clash = next((c for c in by_id[first].conflicts if c in by_id[second].provides), None)
                if clash:
                    return Rejection(
                        later,
                        CONFLICT,
                        f"`{first}` conflicts with {clash}, which `{second}` provides",
                        clash,
                    )
    return None


def _failure_reason(package: LoadedPackage) -> str:
    errors = [diagnostic for diagnostic in package.diagnostics if diagnostic.is_error]
    first = errors[0] if errors else None
    detail = f": {first}" if first else ""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"plugin `{package.id}` failed to load{detail}{more}"
