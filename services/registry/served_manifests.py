"""What the registry serves, checked against shared/manifest's models before it is served.

The scheduler and the hooks service read the compiled manifest and definition as those typed
models; a compiled value that does not fit them is a registry bug, caught here at its source:
the package fails to load with the fields named, instead of a reader failing mid-turn.
"""

from __future__ import annotations

from services.registry.diagnostics import DiagnosticBag
from services.registry.loaded_package import LoadedPackage
from shared.manifest import ManifestError, parse_definition, parse_manifest

BUG_HINT = "this is a registry bug, not the author's: report it with the package"


def check_served_manifests(package: LoadedPackage, bag: DiagnosticBag) -> None:
    """Attach the typed manifest of each runtime and the typed definition; an error for each that does not fit."""
    for runtime in package.runtimes:
        try:
            runtime.compiled = parse_manifest(runtime.manifest)
        except ManifestError as error:
            bag.error("compiled-manifest-invalid", str(error), file=runtime.file, hint=BUG_HINT)
    try:
        package.compiled_definition = parse_definition(package.definition)
    except ManifestError as error:
        bag.error("compiled-manifest-invalid", str(error), hint=BUG_HINT)
