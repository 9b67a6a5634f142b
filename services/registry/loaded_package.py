"""A plugin package as the registry loaded it (package_loader.py): its state, diagnostics, what it
declares and what the registry serves of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from services.registry.diagnostics import Diagnostic
from services.registry.runtime_compiler import CompiledRuntime
from shared.manifest import PackageDefinition

DEFAULT_VERSION = "0.0.0"


class PackageState(StrEnum):
    LOADED = "loaded"
    FAILED = "failed"


@dataclass
class LoadedPackage:
    id: str
    root_dir: Path
    source: str
    state: PackageState
    diagnostics: list[Diagnostic]
    kind: str = "plugin"
    version: str = DEFAULT_VERSION
    display_name: str = ""
    description: str = ""
    tags: list[str] = field(default_factory=list)
    provides: list[str] = field(default_factory=list)
    default_provides: list[str] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    entry: str = ""
    hooks: list[tuple[str, str]] = field(default_factory=list)
    # What the entry module must register, from contributes (the hooks service checks both ways).
    tools: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    # "<point>/<id>" of contributes.extensions.
    extensions: list[str] = field(default_factory=list)
    forms: list[str] = field(default_factory=list)
    # Topics of contributes.events (one declarer per topic in a session).
    event_topics: list[str] = field(default_factory=list)
    # contributes.ui panels that passed their checks: (location, file, spec).
    ui_panels: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    runtimes: list[CompiledRuntime] = field(default_factory=list)
    prompt: str = ""
    prompt_variants: dict[str, str] = field(default_factory=dict)
    # contributes.prompt content by locale, then segment id (PLUGIN.<locale>.md frontmatter).
    prompt_segment_variants: dict[str, dict[str, str]] = field(default_factory=dict)
    definition: dict[str, Any] = field(default_factory=dict)
    # `definition` checked against the shared model (only a package without errors has one).
    compiled_definition: PackageDefinition | None = None

    @property
    def loaded(self) -> bool:
        return self.state is PackageState.LOADED
