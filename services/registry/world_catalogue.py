"""Worlds in the world folders (COVEL_WORLD_DIRS): every world package, loaded and checked against
the plugin packages of the same catalogue scan. The first world of an id wins."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from services.registry.diagnostics import Diagnostic, Severity
from services.registry.loaded_package import LoadedPackage
from services.registry.loaded_world import WORLD_FILE, LoadedWorld
from services.registry.packs import Packs
from services.registry.world_loader import load_world_guarded
from shared.logs import get_logger

log = get_logger(component="world_catalogue")


def _world_folders(world_dir: Path) -> list[Path]:
    try:
        children = sorted(world_dir.iterdir(), key=lambda item: item.name)
    except (FileNotFoundError, NotADirectoryError):
        log.warning("world_dir.missing", world_dir=str(world_dir))
        return []
    return [child for child in children if child.is_dir() and not child.name.startswith((".", "_"))]


def scan_worlds(world_dirs: Sequence[Path], packages: Sequence[LoadedPackage], packs: Packs | None = None) -> list[LoadedWorld]:
    worlds: list[LoadedWorld] = []
    by_id: dict[str, LoadedWorld] = {}
    for world_dir in world_dirs:
        for folder in _world_folders(world_dir):
            world = load_world_guarded(folder, packages, packs)
            first = by_id.get(world.id)
            if first is not None:
                first.diagnostics.append(Diagnostic(
                    severity=Severity.WARNING, code="duplicate-world", file=WORLD_FILE,
                    # Clients read this (ListWorlds): the world folders are the host's business, so no path.
                    message=f"another world with id `{world.id}`, in a later world folder, is ignored; this one is used",
                ))
                continue
            by_id[world.id] = world
            worlds.append(world)
    for world in worlds:
        for diagnostic in world.diagnostics:
            if diagnostic.severity is not Severity.INFO:
                log.warning("world.diagnostic", world_id=world.id, diagnostic=str(diagnostic))
    return worlds
