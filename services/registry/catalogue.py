"""The catalogue: every package found in the plugin folders and every world in the world folders,
with a generation number.

A scan builds a new immutable snapshot; readers always see one whole snapshot, and the
generation (1 after the first scan) bumps on every reload so clients can cache by it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from services.registry.contract_schemas import check_contract_schemas
from services.registry.contract_uses import check_contract_uses
from services.registry.diagnostics import Diagnostic, Severity
from services.registry.entry_registrations import check_entry_registrations
from services.registry.loaded_package import LoadedPackage
from services.registry.loaded_world import LoadedWorld
from services.registry.package_guard import load_package_guarded
from services.registry.packs import DEFAULT_PACK_FILES, Packs, load_packs
from services.registry.settings import COMMUNITY, source_of
from services.registry.validation_cache import ValidationCache
from services.registry.world_catalogue import scan_worlds
from shared.logs import get_logger

log = get_logger(component="catalogue")


@dataclass(frozen=True)
class Snapshot:
    generation: int
    packages: tuple[LoadedPackage, ...]
    plugin_dirs: tuple[Path, ...]
    by_id: dict[str, LoadedPackage] = field(default_factory=dict)
    worlds: tuple[LoadedWorld, ...] = ()
    packs: Packs = field(default_factory=Packs)

    def get(self, plugin_id: str) -> LoadedPackage | None:
        return self.by_id.get(plugin_id)

    def world(self, world_id: str) -> LoadedWorld | None:
        return next((world for world in self.worlds if world.id == world_id), None)


def package_folders(plugin_dir: Path) -> list[Path]:
    try:
        children = sorted(plugin_dir.iterdir(), key=lambda item: item.name)
    except FileNotFoundError:
        log.warning("plugin_dir.missing", plugin_dir=str(plugin_dir))
        return []
    except NotADirectoryError:
        log.warning("plugin_dir.not_a_directory", plugin_dir=str(plugin_dir))
        return []
    return [child for child in children if child.is_dir() and not child.name.startswith((".", "_"))]


def scan(plugin_dirs: Sequence[Path], *, strict: bool = False, builtin_dirs: Sequence[Path] | None = None,
         cache: ValidationCache | None = None) -> list[LoadedPackage]:
    """Load every package folder of every plugin dir, in order; the first package of an id wins.
    Packages of `builtin_dirs` (default: the repository's plugins/) are builtin, the others community.
    `cache`: packages whose files did not change are not validated again (services/registry/validation_cache.py)."""
    packages: list[LoadedPackage] = []
    by_id: dict[str, LoadedPackage] = {}
    for plugin_dir in plugin_dirs:
        source = source_of(plugin_dir, builtin_dirs)
        for folder in package_folders(plugin_dir):
            package = load_package_guarded(folder, source=source, strict=strict, cache=cache)
            first = by_id.get(package.id)
            if first is not None:
                first.diagnostics.append(
                    Diagnostic(
                        severity=Severity.WARNING,
                        code="duplicate-package",
                        message=f"another package with id `{package.id}` at {folder} is ignored; the one at {first.root_dir} is used",
                        plugin_id=package.id,
                    )
                )
                continue
            by_id[package.id] = package
            packages.append(package)
    check_contract_schemas(packages)
    check_contract_uses(packages)
    # The operator's packages' register(covel) is probed here; a community package's code runs only once a session
    # approved it: the hooks service checks its registrations when it loads it then (services/hooks/catalogue_sync.py).
    check_entry_registrations([package for package in packages if package.source != COMMUNITY], cache=cache)
    for package in packages:
        for diagnostic in package.diagnostics:
            if diagnostic.severity is not Severity.INFO:
                log.warning("plugin.diagnostic", plugin_id=package.id, diagnostic=str(diagnostic))
    return packages


def scan_all(plugin_dirs: Sequence[Path], world_dirs: Sequence[Path], *, strict: bool = False,
             builtin_dirs: Sequence[Path] | None = None,
             pack_files: Sequence[Path] = DEFAULT_PACK_FILES,
             cache: ValidationCache | None = None) -> tuple[list[LoadedPackage], list[LoadedWorld], Packs]:
    """The packages and the packs, then the worlds checked against them (a world names plugins, settings, contracts, a pack)."""
    packages = scan(plugin_dirs, strict=strict, builtin_dirs=builtin_dirs, cache=cache)
    packs = load_packs(pack_files)
    return packages, scan_worlds(world_dirs, packages, packs), packs


class Catalogue:
    def __init__(self, plugin_dirs: Sequence[Path], *, strict: bool = False, builtin_dirs: Sequence[Path] | None = None,
                 world_dirs: Sequence[Path] = (), pack_files: Sequence[Path] = DEFAULT_PACK_FILES,
                 cache: ValidationCache | None = None) -> None:
        self._plugin_dirs = tuple(Path(path) for path in plugin_dirs)
        self._world_dirs = tuple(Path(path) for path in world_dirs)
        self._pack_files = tuple(Path(path) for path in pack_files)
        self._builtin_dirs = None if builtin_dirs is None else tuple(Path(path) for path in builtin_dirs)
        self._strict = strict
        self._cache = cache
        self._lock = asyncio.Lock()
        self._snapshot = Snapshot(generation=0, packages=(), plugin_dirs=self._plugin_dirs)
        # Set and replaced on every publish: watchers of the generation wait on the current one.
        self._published = asyncio.Event()
        self._closed = False

    @property
    def current(self) -> Snapshot:
        return self._snapshot

    @property
    def plugin_dirs(self) -> tuple[Path, ...]:
        return self._plugin_dirs

    @property
    def world_dirs(self) -> tuple[Path, ...]:
        return self._world_dirs

    @property
    def builtin_dirs(self) -> tuple[Path, ...] | None:
        return self._builtin_dirs

    def load_now(self) -> Snapshot:
        """Scan synchronously (at start, before serving)."""
        return self._publish(*scan_all(self._plugin_dirs, self._world_dirs, strict=self._strict, builtin_dirs=self._builtin_dirs,
                                       pack_files=self._pack_files, cache=self._cache))

    async def next_after(self, generation: int) -> Snapshot | None:
        """The current snapshot once its generation is past `generation`; None once closed."""
        while self._snapshot.generation <= generation and not self._closed:
            await self._published.wait()
        return None if self._closed else self._snapshot

    def close_watchers(self) -> None:
        """At shutdown: every next_after returns, so watch streams end instead of holding the grace."""
        self._closed = True
        self._published.set()

    async def reload(self) -> Snapshot:
        """Rescan off the event loop; concurrent reloads run one after another."""
        async with self._lock:
            scanned = await asyncio.to_thread(
                scan_all, self._plugin_dirs, self._world_dirs, strict=self._strict, builtin_dirs=self._builtin_dirs,
                pack_files=self._pack_files, cache=self._cache,
            )
            return self._publish(*scanned)

    def _publish(self, packages: list[LoadedPackage], worlds: list[LoadedWorld], packs: Packs | None = None) -> Snapshot:
        snapshot = Snapshot(
            generation=self._snapshot.generation + 1,
            packages=tuple(packages),
            plugin_dirs=self._plugin_dirs,
            by_id={package.id: package for package in packages},
            worlds=tuple(worlds),
            packs=packs if packs is not None else Packs(),
        )
        self._snapshot = snapshot
        published, self._published = self._published, asyncio.Event()
        published.set()
        failed = [package.id for package in packages if not package.loaded]
        failed_worlds = [world.id for world in worlds if not world.loaded]
        log.info("catalogue.loaded", generation=snapshot.generation, plugins=len(packages), failed=failed, worlds=len(worlds),
                 failed_worlds=failed_worlds)
        return snapshot
