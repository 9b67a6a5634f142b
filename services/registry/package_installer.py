"""Install a validated package from a zip into the first community plugin folder.

The zip is unpacked into a private temporary folder (zip_install), validated there in strict
mode (package_validator), and only then moved into place: a package with any error, or an
unsafe archive, leaves the plugin folders untouched.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from services.registry.diagnostics import Diagnostic, has_errors
from services.registry.package_validator import validate_package
from services.registry.settings import COMMUNITY, source_of
from services.registry.zip_install import unpack


class InstallRefused(Exception):
    """The install cannot happen for a reason outside the package (no folder, id taken)."""


@dataclass
class InstallOutcome:
    plugin_id: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    installed_dir: Path | None = None

    @property
    def ok(self) -> bool:
        return self.installed_dir is not None and not has_errors(self.diagnostics)


def validate_zip(data: bytes, *, plugin_id: str = "") -> tuple[str, list[Diagnostic]]:
    with unpack(data, plugin_id=plugin_id) as unpacked:
        if unpacked.root is None:
            return unpacked.plugin_id, unpacked.diagnostics
        report = validate_package(unpacked.root)
        return report.plugin_id, report.diagnostics


def community_dir(plugin_dirs: tuple[Path, ...], builtin_dirs: Sequence[Path] | None = None) -> Path:
    """The first plugin folder that is not a builtin one: an installed package is community, whatever it claims."""
    for plugin_dir in plugin_dirs:
        if source_of(plugin_dir, builtin_dirs) == COMMUNITY:
            return plugin_dir
    raise InstallRefused("no community plugin folder is configured (COVEL_PLUGIN_DIRS lists only builtin folders)")


def install_zip(
    data: bytes,
    plugin_dirs: tuple[Path, ...],
    *,
    plugin_id: str = "",
    replace: bool = False,
    builtin_ids: frozenset[str] = frozenset(),
    builtin_dirs: Sequence[Path] | None = None,
) -> InstallOutcome:
    target_dir = community_dir(plugin_dirs, builtin_dirs)
    with unpack(data, plugin_id=plugin_id) as unpacked:
        outcome = InstallOutcome(plugin_id=unpacked.plugin_id, diagnostics=list(unpacked.diagnostics))
        if unpacked.root is None:
            return outcome
        if unpacked.plugin_id in builtin_ids:
            raise InstallRefused(f"`{unpacked.plugin_id}` is a builtin plugin; a community package cannot replace it")
        report = validate_package(unpacked.root)
        outcome.diagnostics = report.diagnostics
        if not report.ok:
            return outcome
        destination = target_dir / unpacked.plugin_id
        if destination.exists() and not replace:
            # The folder is the host's business (docs/security.md): the message names the package only.
            raise InstallRefused(f"`{unpacked.plugin_id}` is already installed; set replace to overwrite it")
        try:
            _put_in_place(unpacked.root, target_dir, destination)
        except OSError as error:
            # A read-only folder (Kubernetes: plugins come with the image) or a full disk; the path stays out.
            raise InstallRefused(f"`{unpacked.plugin_id}` cannot be written to this registry's community plugin folder "
                                 f"({error.strerror or type(error).__name__}); where plugins are delivered read-only, add "
                                 "them to the image instead (docs/operations.md, Plugins in a cluster)") from None
        outcome.installed_dir = destination
        return outcome


def _put_in_place(unpacked: Path, target_dir: Path, destination: Path) -> None:
    """Copy beside the destination, then swap it in with renames, so a reader never sees half a package."""
    target_dir.mkdir(parents=True, exist_ok=True)
    staging = target_dir / f".installing-{destination.name}"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(unpacked, staging, symlinks=False)
    if destination.exists():
        retired = target_dir / f".replaced-{destination.name}"
        shutil.rmtree(retired, ignore_errors=True)
        destination.rename(retired)
        staging.rename(destination)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        staging.rename(destination)
