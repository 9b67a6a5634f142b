"""The registry's packages as the scheduler reads them: each compiled definition and runtime
manifest parsed into shared/manifest's models once, when plugin_cache.py fetches the package
for a catalogue generation. Nothing in the scheduler reads the wire's Structs itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from covel.registry.v1 import registry_pb2
from shared.manifest import CompiledManifest, ManifestError, PackageDefinition, Setting, parse_definition, parse_manifest
from shared.manifest.package import ContractSchema, Contributes
from shared.manifest.runtime import Permissions
from shared.structs import from_struct

# What a package that did not load declares: nothing (it never runs; its settings are not checked).
NOTHING_CONTRIBUTED = Contributes()


@dataclass(frozen=True)
class Runtime:
    """One runtime of a package: the registry's RuntimeManifest with its compiled manifest typed."""

    runtime_id: str
    plugin_id: str
    type: str
    stage: str
    visibility: str
    prompt: str
    prompt_variants: dict[str, str]
    manifest: CompiledManifest

    @classmethod
    def from_proto(cls, runtime: registry_pb2.RuntimeManifest) -> Runtime:
        return cls(
            runtime_id=runtime.runtime_id, plugin_id=runtime.plugin_id, type=runtime.type, stage=runtime.stage,
            visibility=runtime.visibility, prompt=runtime.prompt, prompt_variants=dict(runtime.prompt_variants),
            manifest=parse_manifest(from_struct(runtime.manifest)),
        )


@dataclass(frozen=True)
class Package:
    """One package of the catalogue. `definition` is None only for a package the registry did not
    load whose listing does not fit the model (it never runs: it declares nothing here)."""

    id: str
    version: str
    root_dir: str
    state: registry_pb2.PluginState.ValueType
    event_topics: tuple[str, ...]
    # "<point>/<id>" of contributes.extensions.
    extensions: tuple[str, ...]
    runtimes: tuple[Runtime, ...]
    definition: PackageDefinition | None
    # contributes.ui panels the registry checked (location, file, spec): ListPanels serves them.
    ui_panels: tuple[registry_pb2.UiPanelSpec, ...] = ()

    @classmethod
    def from_proto(cls, package: registry_pb2.PluginPackage) -> Package:
        """The package typed; ManifestError when a loaded package's definition or manifests do not fit
        (a registry of another version than this scheduler: both read shared/manifest)."""
        loaded = package.state == registry_pb2.PLUGIN_STATE_LOADED
        try:
            definition: PackageDefinition | None = parse_definition(from_struct(package.definition))
        except ManifestError:
            if loaded:
                raise
            definition = None
        return cls(
            id=package.id, version=package.version, root_dir=package.root_dir, state=package.state,
            event_topics=tuple(package.event_topics), extensions=tuple(package.extensions), runtimes=tuple(Runtime.from_proto(runtime) for runtime in package.runtimes),
            definition=definition, ui_panels=tuple(package.ui_panels),
        )

    @property
    def loaded(self) -> bool:
        return self.state == registry_pb2.PLUGIN_STATE_LOADED

    @property
    def contributes(self) -> Contributes:
        return self.definition.contributes if self.definition is not None else NOTHING_CONTRIBUTED

    @property
    def contracts(self) -> Mapping[str, ContractSchema]:
        """Contracts the package defines (contract id -> its schema file)."""
        return self.definition.contracts if self.definition is not None else {}

    @property
    def prompt_segment_variants(self) -> Mapping[str, Mapping[str, str]]:
        """locale -> contributes.prompt id -> translated content."""
        return (self.definition.prompt_segment_variants if self.definition is not None else None) or {}

    def settings_by_key(self) -> dict[str, Setting] | None:
        """key -> contributes.settings declaration; None when the package declares no settings."""
        return self.definition.settings_by_key() if self.definition is not None else None

    @property
    def permissions(self) -> Permissions | None:
        return self.definition.permissions if self.definition is not None else None
