"""What a session's community plugins may do once approved, from their manifests: GetSessionPlugins' `community`,
which a client shows when it asks the player to approve one (docs/plugins.md, "Community plugins and approval")."""

from __future__ import annotations

from collections.abc import Iterable

from covel.scheduler.v1 import scheduler_pb2
from services.scheduler.catalogue import Package

COMMUNITY = "community"


def _contributes(package: Package) -> list[str]:
    """Each kind of contribution as "<kind>: <names>", in a fixed order; kinds it does not contribute are left out."""
    found = package.contributes
    kinds = [
        ("hooks", [f"{hook.event} ({hook.enforce})" for hook in found.hooks or []]),
        ("tools", list(found.tools or [])),
        ("actions", list(found.actions or [])),
        ("commands", [str(command.get("name", "")) for command in found.commands or []]),
        ("action kinds", [kind.kind for kind in found.action_kinds or []]),
        ("services", [f"{service.contract} ({service.access})" for service in found.services or []]),
        ("extensions", [f"{entry.point}/{entry.id}" for entry in found.extensions or []]),
        ("events", [topic.topic for topic in found.events or []]),
        ("data", sorted(found.data or {})),
        ("panels", sorted(found.ui or {})),
        ("prompt segments", [str(segment.id) for segment in found.prompt or []]),
    ]
    return [f"{kind}: {', '.join(names)}" for kind, names in kinds if names]


def _http(package: Package) -> list[str]:
    grants = (package.permissions.http if package.permissions is not None else None) or []
    return [f"{' '.join(grant.methods or ['any method'])} {grant.origin}" for grant in grants]


def community_plugins(packages: Iterable[Package], approved: Iterable[str]) -> list[scheduler_pb2.CommunityPlugin]:
    """The community packages among `packages`, each with its permissions and contributions."""
    approved = set(approved)
    found = []
    for package in packages:
        definition = package.definition
        if definition is None or definition.source != COMMUNITY:
            continue
        found.append(
            scheduler_pb2.CommunityPlugin(
                plugin_id=package.id,
                display_name=definition.display_name,
                description=definition.description,
                version=package.version,
                approved=package.id in approved,
                http=_http(package),
                runtimes=[runtime.runtime_id for runtime in package.runtimes],
                contributes=_contributes(package),
            )
        )
    return found
