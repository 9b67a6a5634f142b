"""Static validation of a plugin package, as `covel validate-plugin`, ValidatePackage and
InstallPackage run it: the loader in strict mode. Problems that only drop a runtime at load
(a missing stage or handler, a missing RUNTIME.md) and unknown fields are errors here, and
validation adds the advice warnings (defaults written out, longer forms). No plugin code runs
unless the caller asks for the registration probe (`probe=True`, `covel validate-plugin --probe`:
entry_registrations.py runs register(covel) in a sandboxed process, never in this one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from services.registry.diagnostics import Diagnostic, Severity, has_errors
from services.registry.entry_registrations import check_entry_registrations
from services.registry.loaded_package import LoadedPackage
from services.registry.manifest_reading import PLUGIN_FILE, RUNTIME_FILE, RUNTIMES_DIR
from services.registry.package_guard import load_package_guarded


class NotAPackage(ValueError):
    """The path names nothing that can be validated (bad usage, not a broken package)."""


@dataclass
class ValidationReport:
    # The package folder that was validated.
    root: Path
    plugin_id: str
    diagnostics: list[Diagnostic]
    package: LoadedPackage | None = None
    # What the caller named, when it was not the folder itself (a PLUGIN.md or RUNTIME.md).
    named: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)

    @property
    def warnings(self) -> list[Diagnostic]:
        return [item for item in self.diagnostics if item.severity is Severity.WARNING]

    def languages(self) -> tuple[list[str], list[str]]:
        """(text languages, instruction languages): English plus locale files / prompt variants."""
        package = self.package
        if package is None:
            return ["en"], ["en"]
        text = ["en", *sorted(package.definition.get("locales", {}))]
        variants = set(package.prompt_variants) | set(package.prompt_segment_variants)
        for runtime in package.runtimes:
            variants.update(runtime.prompt_variants)
        return list(dict.fromkeys(text)), ["en", *sorted(variants)]


def package_root_of(path: Path) -> Path:
    """The package folder for a folder, a PLUGIN.md (or variant) or a runtimes/<id>/RUNTIME.md."""
    if not path.exists():
        raise NotAPackage(f"{path}: no such file or folder")
    if path.is_dir():
        if (path / PLUGIN_FILE).is_file() or not (path / RUNTIME_FILE).is_file():
            return path
        path = path / RUNTIME_FILE
    name = path.name
    if name.startswith("PLUGIN.") and name.endswith(".md"):
        return path.parent
    if name.startswith("RUNTIME.") and name.endswith(".md"):
        runtimes = path.parent.parent
        if runtimes.name != RUNTIMES_DIR:
            raise NotAPackage(f"{path}: a RUNTIME.md lives in <package>/{RUNTIMES_DIR}/<id>/")
        return runtimes.parent
    raise NotAPackage(f"{path}: name a package folder, its {PLUGIN_FILE}, or a {RUNTIMES_DIR}/<id>/{RUNTIME_FILE}")


def validate_package(root: Path, *, source: str = "community", probe: bool = False) -> ValidationReport:
    """The package's static checks; with `probe`, its entry's register(covel) too, against contributes."""
    package = load_package_guarded(root, source=source, strict=True)
    if probe:
        check_entry_registrations([package])
    return ValidationReport(root=root, plugin_id=package.id, diagnostics=list(package.diagnostics), package=package)


def validate_paths(paths: list[Path], *, probe: bool = False) -> list[ValidationReport]:
    """One report per package, in the order first named; NotAPackage for a path that names none.
    `probe`: run each entry's register(covel) in the probe's sandbox (static checks only without)."""
    roots: dict[Path, list[str]] = {}
    for path in paths:
        root = package_root_of(path)
        named = roots.setdefault(root.resolve(), [])
        if path.resolve() != root.resolve():
            named.append(str(path))
    reports = []
    for root, named in roots.items():
        report = validate_package(root, source=source_for(root), probe=probe)
        report.named = named
        reports.append(report)
    return reports


def source_for(root: Path) -> str:
    from services.registry.settings import source_of

    return source_of(root.parent)
