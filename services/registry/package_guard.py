"""One package that cannot be loaded at all fails alone: the registry reports it and carries on.

Bad input should end as a diagnostic inside the loader; this is the net under it, so that a
loader bug or an input no limit foresaw (a MemoryError, a RecursionError) marks that one package
failed instead of ending the scan, and so the registry's start or an RPC.
"""

from __future__ import annotations

from pathlib import Path

from services.registry.diagnostics import DiagnosticBag
from services.registry.loaded_package import LoadedPackage, PackageState
from services.registry.manifest_reading import PLUGIN_FILE
from services.registry.package_loader import load_package
from services.registry.validation_cache import ValidationCache
from shared.logs import get_logger

log = get_logger(component="package_guard")


def load_package_guarded(root: Path, *, source: str, strict: bool = False, cache: ValidationCache | None = None) -> LoadedPackage:
    """`cache`: the result kept for the same files, when there is one (services/registry/validation_cache.py)."""
    try:
        if cache is not None:
            return cache.load(root, source, strict, lambda: load_package(root, source=source, strict=strict))
        return load_package(root, source=source, strict=strict)
    except Exception as error:  # the net: any failure is this package's diagnostic, never the registry's end
        log.exception("package.load_crashed", package_dir=str(root))
        bag = DiagnosticBag(plugin_id=root.name, file=PLUGIN_FILE)
        bag.error(
            "package-unloadable",
            f"the package could not be loaded ({type(error).__name__}); it is left out",
            hint="the registry log has the details; simplify the manifest or report the problem",
        )
        return LoadedPackage(id=root.name, root_dir=root.resolve(), source=source, state=PackageState.FAILED, diagnostics=bag.items)
