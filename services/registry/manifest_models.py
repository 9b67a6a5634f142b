"""Pydantic models of the author format: root PLUGIN.md fields, contributes, runtime groups.

Field names are the spec's (camelCase), so a validation error's location is the path the
author wrote. Known groups forbid unknown keys (a half-understood declaration never runs);
unknown top-level fields are dropped by the loader with a warning before these models see
the data. Groups the kernel does not interpret yet are typed loosely but kept as fields.

Alternatives (`- PreToolUse` or `{event, enforce}`) are tagged unions chosen by the input's
shape, so one wrong value gives exactly one error at the author's path.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    Field,
)

from services.registry.manifest_fields import (
    ActionName,
    ContractId,
    HookEventName,
    HttpsLink,
    NonEmpty,
    NonNegativeInt,
    PositiveInt,
    Strict,
    either,
)
from services.registry.runtime_models import RUNTIME_FIELDS, DatasetOp, DatasetToolKind, Permissions, RuntimeDecl

# ----- contributes ------------------------------------------------------------------------------


class HookDecl(Strict):
    event: HookEventName
    enforce: Literal["pre", "normal", "post"] | None = None


if TYPE_CHECKING:  # what pydantic's tagged union holds, for the checker
    HookItem = str | HookDecl
else:
    HookItem = either(HookEventName, str, HookDecl)


class SettingDecl(Strict):
    key: NonEmpty
    type: NonEmpty
    label: str | None = None
    description: str | None = None
    default: Any = None
    options: list[Any] | None = None
    min: float | None = None
    max: float | None = None
    step: float | None = None
    placeholder: str | None = None


class ServiceDecl(Strict):
    contract: ContractId
    modelFacing: bool | None = None
    access: Literal["read", "write"] | None = None


class ExtensionDecl(Strict):
    point: NonEmpty
    id: NonEmpty
    order: int | None = None
    slot: str | None = None


class DatasetDecl(Strict):
    """`contributes.datasets.<name>`: a typed namespace of this package's plugin data."""

    schema_: NonEmpty = Field(alias="schema")
    key: NonEmpty | None = None
    ops: list[DatasetOp] | None = None
    tools: list[DatasetToolKind] | None = None
    description: Annotated[str, Field(min_length=1, max_length=500)] | None = None


class ActionKindDisplay(Strict):
    label: NonEmpty | None = None
    icon: NonEmpty | None = None
    placeholder: str | None = None


class ActionKindDecl(Strict):
    """`contributes.actionKinds[]`: an action type players can submit, `<pluginId>/<name>` on the wire."""

    name: NonEmpty
    roles: Annotated[list[NonEmpty], Field(min_length=1)] | None = None
    text: Literal["required", "optional", "none"] | None = None
    actor: bool | None = None
    schema_: NonEmpty | None = Field(default=None, alias="schema")
    display: ActionKindDisplay | None = None


class EventDecl(Strict):
    """`contributes.events[]`: a plugin event topic this package declares (one declarer per session)."""

    topic: NonEmpty
    schema_: NonEmpty | dict[str, Any] | None = Field(default=None, alias="schema")
    description: str | None = None
    advertise: bool | None = None


class DataSearch(Strict):
    text: NonEmpty


class DataDecl(Strict):
    """`contributes.data.<namespace>`: schema, version, accepted contracts, search, authoring."""

    schema_: NonEmpty | None = Field(default=None, alias="schema")
    version: PositiveInt | None = None
    accepts: list[ContractId] | None = None
    search: DataSearch | None = None
    authoring: dict[str, Any] | None = None


class PromptDepth(Strict):
    depth: NonNegativeInt


class PromptSegment(Strict):
    """`contributes.prompt[]`: a static prompt segment the host registers itself."""

    id: NonEmpty
    content: NonEmpty
    position: either(Literal["system", "pre-history", "post-history"], str, PromptDepth)  # type: ignore[valid-type]
    role: Literal["system", "user", "assistant"] | None = None


class Contributes(Strict):
    tools: list[NonEmpty] | None = None
    actions: list[ActionName] | None = None
    commands: list[dict[str, Any]] | None = None
    services: list[either(ContractId, str, ServiceDecl)] | None = None  # type: ignore[valid-type]
    extensions: list[either(NonEmpty, str, ExtensionDecl)] | None = None  # type: ignore[valid-type]
    hooks: list[HookItem] | None = None
    forms: list[NonEmpty] | None = None
    events: list[either(NonEmpty, str, EventDecl)] | None = None  # type: ignore[valid-type]
    settings: list[SettingDecl] | None = None
    data: dict[str, DataDecl] | None = None
    datasets: dict[str, DatasetDecl] | None = None
    actionKinds: list[ActionKindDecl] | None = None
    ui: dict[str, Any] | None = None
    worldProjections: list[Any] | dict[str, Any] | None = None
    prompt: list[PromptSegment] | None = None
    wires: list[Any] | None = None


CONTRIBUTES_FIELDS = frozenset(Contributes.model_fields)


# ----- root -------------------------------------------------------------------------------------


class AuthorLink(Strict):
    label: Annotated[str, Field(min_length=1, max_length=40)]
    url: HttpsLink


class Author(Strict):
    name: Annotated[str, Field(min_length=1, max_length=80)] | None = None
    url: HttpsLink | None = None
    about: Annotated[str, Field(max_length=500)] | None = None
    links: Annotated[list[AuthorLink], Field(max_length=6)] | None = None


class ProvidesDecl(Strict):
    contract: ContractId
    default: bool | None = None


class ContractDecl(Strict):
    schema_: NonEmpty = Field(alias="schema")


class PluginManifest(Strict):
    """The root PLUGIN.md frontmatter."""

    id: NonEmpty | None = None
    kind: Literal["core", "plugin"] | None = None
    version: NonEmpty | None = None
    displayName: str | None = None
    description: str | None = None
    tags: list[NonEmpty] | None = None
    author: either(NonEmpty, str, Author) | None = None  # type: ignore[valid-type]
    license: Annotated[str, Field(max_length=64)] | None = None
    homepage: HttpsLink | None = None
    covel: NonEmpty | None = None
    provides: list[either(ContractId, str, ProvidesDecl)] | None = None  # type: ignore[valid-type]
    requires: list[ContractId] | None = None
    conflicts: list[ContractId] | None = None
    contracts: dict[str, ContractDecl] | None = None
    entry: NonEmpty | None = None
    permissions: Permissions | None = None
    contributes: Contributes | None = None
    runtime: RuntimeDecl | None = None


ROOT_FIELDS = frozenset(PluginManifest.model_fields)

# Fields that limit or identify a package or runtime: a near-miss spelling of one of them is an
# error ("looks like `permissions`"), not a dropped unknown field.
GUARDED_ROOT_FIELDS = ("id", "kind", "version", "covel", "provides", "requires", "conflicts", "permissions", "entry", "runtime")
GUARDED_RUNTIME_FIELDS = ("guard", "permissions", "effects", "schedule", "io", "function")
# Package-level fields a RUNTIME.md must not declare.
PACKAGE_ONLY_FIELDS = ROOT_FIELDS - RUNTIME_FIELDS
