"""A compiled package definition: what the registry serves in PluginPackage.definition.

contributes keeps the author's groups as written or left out: a left-out group is None, which
is not the same as an empty one (a package that declares `settings: []` accepts no setting
values; one without `settings` is not checked). Open JSON areas (schemas, UI specs, commands,
world projections, setting values) stay dicts and lists.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from shared.manifest.base import ManifestModel
from shared.manifest.runtime import Dataset, Permissions


class ProvidedContract(ManifestModel):
    contract: str
    default: bool


class ContractSchema(ManifestModel):
    schema_: str = Field(alias="schema")


class HookEntry(ManifestModel):
    event: str
    enforce: Literal["pre", "normal", "post"]


class ServiceEntry(ManifestModel):
    contract: str
    model_facing: bool
    access: Literal["read", "write"]


class ExtensionEntry(ManifestModel):
    point: str
    id: str
    order: int
    slot: str | None = None


class EventTopic(ManifestModel):
    topic: str
    schema_: str | dict[str, Any] | None = Field(default=None, alias="schema")
    description: str | None = None
    # False keeps the topic out of what story runtimes may emit.
    advertise: bool | None = None


class Setting(ManifestModel):
    key: str
    type: str
    label: str | None = None
    description: str | None = None
    default: Any = None
    options: list[Any] | None = None
    min: float | None = None
    max: float | None = None
    step: float | None = None
    placeholder: str | None = None

    def declaration(self) -> dict[str, Any]:
        """The declaration as shared.plugin_settings' value rules read it (the JSON form)."""
        return self.to_json()


class DataSearch(ManifestModel):
    text: str


class DataNamespace(ManifestModel):
    version: int
    schema_: str | None = Field(default=None, alias="schema")
    accepts: list[str] | None = None
    search: DataSearch | None = None
    authoring: dict[str, Any] | None = None


class ActionKindDisplay(ManifestModel):
    label: str | None = None
    icon: str | None = None
    placeholder: str | None = None


class ActionKind(ManifestModel):
    name: str
    # `<pluginId>/<name>`, as actions carry it on the wire.
    kind: str
    roles: list[str]
    text: Literal["required", "optional", "none"]
    actor: bool
    schema_: str | None = Field(default=None, alias="schema")
    display: ActionKindDisplay | None = None


class PromptDepth(ManifestModel):
    depth: int


class PromptSegment(ManifestModel):
    id: str
    content: str
    position: Literal["system", "pre-history", "post-history"] | PromptDepth
    role: Literal["system", "user", "assistant"]


class Contributes(ManifestModel):
    tools: list[str] | None = None
    actions: list[str] | None = None
    commands: list[dict[str, Any]] | None = None
    services: list[ServiceEntry] | None = None
    extensions: list[ExtensionEntry] | None = None
    hooks: list[HookEntry] | None = None
    forms: list[str] | None = None
    events: list[EventTopic] | None = None
    settings: list[Setting] | None = None
    data: dict[str, DataNamespace] | None = None
    datasets: dict[str, Dataset] | None = None
    action_kinds: list[ActionKind] | None = None
    ui: dict[str, Any] | None = None
    world_projections: list[Any] | dict[str, Any] | None = None
    prompt: list[PromptSegment] | None = None
    wires: list[Any] | None = None


class AuthorLink(ManifestModel):
    label: str
    url: str


class Author(ManifestModel):
    name: str | None = None
    url: str | None = None
    about: str | None = None
    links: list[AuthorLink] | None = None


class PackageDefinition(ManifestModel):
    """One loaded package as the registry serves it."""

    id: str
    kind: Literal["core", "plugin"]
    version: str
    display_name: str
    description: str
    tags: list[str]
    provides: list[ProvidedContract]
    requires: list[str]
    conflicts: list[str]
    contracts: dict[str, ContractSchema]
    contributes: Contributes
    # The ids of its runtimes.
    runtimes: list[str]
    source: str
    entry: str | None = None
    # locale -> file -> translated frontmatter fields (PLUGIN.<locale>.md, RUNTIME.<locale>.md).
    locales: dict[str, dict[str, Any]] | None = None
    # locale -> contributes.prompt id -> translated content.
    prompt_segment_variants: dict[str, dict[str, str]] | None = None
    license: str | None = None
    homepage: str | None = None
    covel: str | None = None
    author: str | Author | None = None
    permissions: Permissions | None = None

    def settings_by_key(self) -> dict[str, Setting] | None:
        """key -> declaration of contributes.settings; None when the package declares no settings."""
        if self.contributes.settings is None:
            return None
        return {setting.key: setting for setting in self.contributes.settings}


def parse_definition(data: dict[str, Any]) -> PackageDefinition:
    """The served JSON form as a PackageDefinition; ManifestError names every field that does not fit."""
    return PackageDefinition.parse(data, f"the definition of package {data.get('id') or '(no id)'}")
