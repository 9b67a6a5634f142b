"""What compiling one runtime works with: the declaration, where it was written, the diagnostics bag, and
the package's files as the manifest names them."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from services.registry.code_paths import resolve_code_file
from services.registry.diagnostics import DiagnosticBag, Severity
from services.registry.runtime_models import RuntimeDecl


@dataclass
class RuntimeSource:
    """Where a runtime was written and what it inherits from its package."""

    plugin_id: str
    runtime_id: str
    package_root: Path
    # The manifest file, relative to the package root ("PLUGIN.md", "runtimes/x/RUNTIME.md").
    file: str
    # Field path prefix: "runtime" for an inline runtime, "" in a RUNTIME.md.
    prefix: str
    inline: bool
    plugin_version: str
    contributed_tools: list[str] = field(default_factory=list)
    # Load mode drops unrunnable runtimes with a warning; strict mode (validate/install) errors.
    strict: bool = False


class CompileScope:
    def __init__(self, decl: RuntimeDecl, source: RuntimeSource, bag: DiagnosticBag) -> None:
        self.decl = decl
        self.source = source
        self.bag = bag
        self.unrunnable = False

    # -- diagnostics --------------------------------------------------------------------------

    def path(self, relative: str) -> str:
        return f"{self.source.prefix}.{relative}" if self.source.prefix else relative

    def error(self, code: str, message: str, relative: str, hint: str = "") -> None:
        self.bag.error(code, message, file=self.source.file, field_path=self.path(relative), hint=hint)

    def drop(self, code: str, message: str, relative: str, hint: str = "") -> None:
        """A problem that makes only this runtime unrunnable: dropped at load, an error when strict."""
        self.unrunnable = True
        severity = Severity.ERROR if self.source.strict else Severity.WARNING
        suffix = "" if self.source.strict else f"; runtime {self.source.runtime_id} is not loaded"
        self.bag.add(severity, code, message + suffix, file=self.source.file, field_path=self.path(relative), hint=hint)

    # -- files --------------------------------------------------------------------------------

    def package_file(self, written: str) -> tuple[str | None, str]:
        """A path written relative to the manifest, as a package-relative path (None: outside)."""
        manifest_dir = posixpath.dirname(self.source.file)
        if written.startswith("/") or "\\" in written:
            return None, written
        joined = posixpath.normpath(posixpath.join(manifest_dir, written))
        if joined == ".." or joined.startswith("../") or joined == ".":
            return None, joined
        return joined, joined

    def code_file(self, written: str, relative_field: str) -> str | None:
        """A written handler or guard path as the package-relative module it loads (None: outside)."""
        relative, _ = self.package_file(written)
        if relative is None:
            return None
        return resolve_code_file(
            relative, self.existing_file, self.bag, written=written, file=self.source.file, field_path=self.path(relative_field)
        )

    def existing_file(self, relative: str) -> bool:
        target = self.source.package_root / relative
        try:
            resolved = target.resolve()
            root = self.source.package_root.resolve()
        except OSError:
            return False
        return target.is_file() and resolved.is_relative_to(root)
