"""Which plugins run in a session: the spec's resolveSessionPlugins and resolveConfirmedSessionPlugins.

New session: active = core plugins + requested, minus excluded (excluded wins, also over core);
a core plugin that is a default provider steps back when a requested plugin provides the same
contract; every `requires` contract that no active plugin provides pulls in one loaded
provider (the one marked default, else the only one). The world's requiredContracts are met
the same way, and what cannot be met is listed in `unmet` without blocking the session. A
community provider with server code the player has not approved is never pulled in
(`approval-required`). A plugin whose requirement cannot be met is rejected, and the
providers it alone pulled in go with it; requested and core plugins rejected for a missing
provider are also listed as `unavailable`: they stay in `session_plugins` (what the session records as
activePlugins), and so does the one installed provider they wait for when it cannot run now (a
community plugin not approved, a package that failed to load), so that they come back by
themselves once it can (approved, repaired). Conflicting
contracts and a shared contributes.events topic reject the plugin accepted later (explicit
before core before auto-added). Active plugins are listed in catalogue order.

Saved session: the confirmed set is checked against the current catalogue, nothing is added.
Approval is the trust gate of each execution: a community member the player has not approved runs
nothing (`approval-required`), and members that need what only it provides wait with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from services.registry.loaded_package import LoadedPackage
from services.registry.manifest_fields import SINGLE_PROVIDER_POINTS

NOT_FOUND = "not-found"
FAILED_TO_LOAD = "failed-to-load"
MISSING_PROVIDER = "missing-provider"
AMBIGUOUS_PROVIDER = "ambiguous-provider"
CONFLICT = "conflict"
SUPERSEDED = "superseded"
EVENT_TOPIC_CONFLICT = "event-topic-conflict"
APPROVAL_REQUIRED = "approval-required"
EXCLUDED = "excluded"
# Rejections that switch a requested or core plugin off until its provider is back.
UNAVAILABLE_CODES = frozenset({MISSING_PROVIDER, AMBIGUOUS_PROVIDER, APPROVAL_REQUIRED})
WORLD = "<world>"


@dataclass(frozen=True)
class Rejection:
    plugin_id: str
    code: str
    reason: str
    contract: str = ""
    topic: str = ""


@dataclass(frozen=True)
class Unmet:
    contract: str
    code: str
    reason: str
    providers: tuple[str, ...] = ()


@dataclass
class Resolution:
    # The plugins that run now; session_plugins adds the unavailable ones the session keeps.
    active: list[str] = field(default_factory=list)
    session_plugins: list[str] = field(default_factory=list)
    auto_added: list[str] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    unavailable: list[Rejection] = field(default_factory=list)
    unmet: list[Unmet] = field(default_factory=list)


@dataclass
class ConfirmedResolution:
    runnable: list[str] = field(default_factory=list)
    unavailable: list[Rejection] = field(default_factory=list)


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def needs_approval(package: LoadedPackage, approved: set[str] | None) -> bool:
    """A community package with code (entry, runtimes) runs none of it until the player approved it."""
    has_code = bool(package.entry or package.runtimes)
    return approved is not None and package.source == "community" and has_code and package.id not in approved


def approval_reason(plugin_id: str) -> str:
    return f"plugin `{plugin_id}` is a community plugin; approve it with SetPluginApprovals"


@dataclass(frozen=True)
class _Choice:
    pick: LoadedPackage | None
    code: str = ""
    reason: str = ""
    providers: tuple[str, ...] = ()


def _choose_provider(
    contract: str,
    packages: Sequence[LoadedPackage],
    excluded_ids: set[str],
    rejected: dict[str, Rejection],
    approved: set[str] | None,
) -> _Choice:
    providers = tuple(package.id for package in packages if package.loaded and contract in package.provides)
    candidates = [
        package
        for package in packages
        if package.loaded and contract in package.provides and package.id not in excluded_ids and package.id not in rejected
    ]
    unapproved = [package for package in candidates if needs_approval(package, approved)]
    eligible = [package for package in candidates if package not in unapproved]
    defaults = [package for package in eligible if contract in package.default_provides]
    pick = defaults if defaults else eligible
    if len(pick) == 1:
        return _Choice(pick[0])
    if pick:
        names = ", ".join(package.id for package in pick)
        return _Choice(None, AMBIGUOUS_PROVIDER, f"{contract} is required and several plugins provide it ({names}); request one of them", providers)
    if unapproved:
        names = ", ".join(package.id for package in unapproved)
        return _Choice(None, APPROVAL_REQUIRED, f"{contract} is required; its provider {names} runs server code the player has not approved", providers)
    if any(provider in excluded_ids for provider in providers):
        return _Choice(None, EXCLUDED, f"{contract} is required and its providers are excluded", providers)
    return _Choice(None, MISSING_PROVIDER, f"{contract} is required and no loaded plugin provides it", providers)


def resolve_session_plugins(
    packages: Sequence[LoadedPackage],
    requested: Sequence[str],
    excluded: Sequence[str],
    *,
    approved: Sequence[str] | None = None,
    required_contracts: Sequence[str] = (),
) -> Resolution:
    by_id = {package.id: package for package in packages}
    order = {package.id: index for index, package in enumerate(packages)}
    excluded_ids = set(excluded)
    approved_ids = set(approved) if approved is not None else None
    rejected: dict[str, Rejection] = {}
    explicit = _explicit_requests(requested, by_id, excluded_ids, rejected)
    core = _core_plugins(packages, explicit, by_id, excluded_ids, rejected)

    world_requires = list(dict.fromkeys(required_contracts))
    base = explicit + core
    while True:
        accepted = [plugin_id for plugin_id in base if plugin_id not in rejected]
        active = set(accepted)
        auto: list[str] = []
        new: dict[str, Rejection] = {}
        unmet: list[Unmet] = []
        queue = [WORLD, *accepted]
        while queue:
            plugin_id = queue.pop(0)
            contracts = world_requires if plugin_id == WORLD else by_id[plugin_id].requires
            for contract in contracts:
                if any(contract in by_id[other].provides for other in active):
                    continue
                choice = _choose_provider(contract, packages, excluded_ids, rejected, approved_ids)
                if choice.pick is not None:
                    active.add(choice.pick.id)
                    auto.append(choice.pick.id)
                    queue.append(choice.pick.id)
                    continue
                if plugin_id == WORLD:
                    unmet.append(Unmet(contract, choice.code, choice.reason, choice.providers))
                    continue
                code = MISSING_PROVIDER if choice.code == EXCLUDED else choice.code
                reason = choice.reason.replace("its providers are excluded", "no loaded plugin provides it (its providers are excluded)")
                new[plugin_id] = Rejection(plugin_id, code, reason, contract)
                break
        if not new:
            conflict = _first_conflict([*accepted, *auto], by_id)
            if conflict is None:
                break
            new[conflict.plugin_id] = conflict
        rejected.update(new)

    kept = set(explicit) | {package.id for package in packages if package.kind == "core"}
    unavailable = [item for item in rejected.values() if item.code in UNAVAILABLE_CODES and item.plugin_id in kept]
    waited_for = {
        provider
        for item in unavailable
        if (provider := _installed_provider(item.contract, packages, excluded_ids, approved_ids)) is not None
    }
    recorded = active | {item.plugin_id for item in unavailable} | waited_for
    return Resolution(
        active=sorted(active, key=order.__getitem__),
        session_plugins=sorted(recorded, key=order.__getitem__),
        auto_added=sorted(auto, key=order.__getitem__),
        rejected=list(rejected.values()),
        unavailable=unavailable,
        unmet=unmet,
    )


def _explicit_requests(
    requested: Sequence[str], by_id: dict[str, LoadedPackage], excluded_ids: set[str], rejected: dict[str, Rejection]
) -> list[str]:
    """The requested plugins that are installed and loaded (not excluded); the others go to `rejected`."""
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
    return explicit


def _core_plugins(
    packages: Sequence[LoadedPackage],
    explicit: list[str],
    by_id: dict[str, LoadedPackage],
    excluded_ids: set[str],
    rejected: dict[str, Rejection],
) -> list[str]:
    """The core plugins that join without being requested: loaded, not excluded, and not the default
    provider of a contract a requested plugin provides (those, and failed ones, go to `rejected`)."""
    explicit_provides = {contract for plugin_id in explicit for contract in provided(by_id[plugin_id])}
    core: list[str] = []
    for package in packages:
        if package.kind != "core" or package.id in excluded_ids or package.id in explicit:
            continue
        if not package.loaded:
            rejected[package.id] = Rejection(package.id, FAILED_TO_LOAD, _failure_reason(package))
            continue
        defaults = [*package.default_provides, *single_points(package)]
        replaced = [contract for contract in defaults if contract in explicit_provides]
        if replaced:
            by = next(pid for pid in explicit if replaced[0] in provided(by_id[pid]))
            rejected[package.id] = Rejection(
                package.id,
                SUPERSEDED,
                f"the requested plugin `{by}` provides {replaced[0]}, of which `{package.id}` is only the default provider",
                replaced[0],
            )
            continue
        core.append(package.id)
    return core


def _installed_provider(contract: str, packages: Sequence[LoadedPackage], excluded_ids: set[str], approved: set[str] | None) -> str | None:
    """The one installed, not excluded provider of a contract that cannot run now (not approved,
    failed to load): the dependency a stopped plugin waits for."""
    providers = [package for package in packages if contract and contract in package.provides and package.id not in excluded_ids]
    if len(providers) != 1:
        return None
    provider = providers[0]
    return provider.id if not provider.loaded or needs_approval(provider, approved) else None


def resolve_confirmed_session_plugins(
    packages: Sequence[LoadedPackage], active_plugins: Sequence[str], *, approved: Sequence[str] | None = None
) -> ConfirmedResolution:
    """A saved session's activePlugins against the current catalogue: nothing is added; members
    that are not installed, failed to load, are community plugins not approved (when `approved` is
    given), lack a required provider within the set, or conflict with an earlier member do not run
    now (they stay in activePlugins)."""
    by_id = {package.id: package for package in packages}
    members = _unique(active_plugins)
    approved_ids = set(approved) if approved is not None else None
    unavailable: dict[str, Rejection] = {}
    for plugin_id in members:
        package = by_id.get(plugin_id)
        if package is None:
            unavailable[plugin_id] = Rejection(plugin_id, NOT_FOUND, f"no plugin `{plugin_id}` is installed")
        elif not package.loaded:
            unavailable[plugin_id] = Rejection(plugin_id, FAILED_TO_LOAD, _failure_reason(package))
        elif needs_approval(package, approved_ids):
            unavailable[plugin_id] = Rejection(plugin_id, APPROVAL_REQUIRED, approval_reason(plugin_id))
    while True:
        running = [plugin_id for plugin_id in members if plugin_id not in unavailable]
        new: Rejection | None = None
        for plugin_id in running:
            for contract in by_id[plugin_id].requires:
                if not any(contract in by_id[other].provides for other in running if other != plugin_id) and contract not in by_id[plugin_id].provides:
                    waiting = [other for other in unavailable if other in by_id and contract in by_id[other].provides]
                    why = f" (its provider `{waiting[0]}` does not run now: {unavailable[waiting[0]].code})" if waiting else ""
                    new = Rejection(
                        plugin_id, MISSING_PROVIDER, f"{contract} is required and no plugin of this session provides it now{why}", contract
                    )
                    break
            if new:
                break
        if new is None:
            new = _first_conflict(running, by_id)
        if new is None:
            break
        unavailable[new.plugin_id] = new
    return ConfirmedResolution(
        runnable=[plugin_id for plugin_id in members if plugin_id not in unavailable],
        unavailable=[unavailable[plugin_id] for plugin_id in members if plugin_id in unavailable],
    )


def single_points(package: LoadedPackage) -> list[str]:
    """The one-provider extension points (SINGLE_PROVIDER_POINTS) the package has an extension of."""
    return sorted({extension.split("/", 1)[0] for extension in package.extensions} & SINGLE_PROVIDER_POINTS)


def provided(package: LoadedPackage) -> list[str]:
    """What the package provides for the resolution's exclusivity rules: its contracts and its one-provider points."""
    return [*package.provides, *single_points(package)]


def _first_conflict(accepted: Sequence[str], by_id: dict[str, LoadedPackage]) -> Rejection | None:
    """Conflicting plugins: the one accepted later (explicit before core before auto) is rejected."""
    for index, later in enumerate(accepted):
        for earlier in accepted[:index]:
            topic = next((t for t in by_id[later].event_topics if t in by_id[earlier].event_topics), None)
            if topic:
                return Rejection(
                    later,
                    EVENT_TOPIC_CONFLICT,
                    f"event topic `{topic}` is declared by both `{earlier}` and `{later}`; a topic has one declarer per session",
                    topic=topic,
                )
            point = next((p for p in single_points(by_id[later]) if p in single_points(by_id[earlier])), None)
            if point:
                return Rejection(later, CONFLICT, f"`{earlier}` and `{later}` both provide {point}, which takes one provider per session",
                                 point)
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
