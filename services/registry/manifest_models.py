"""Pydantic models of the author format: root PLUGIN.md fields, contributes, runtime groups.

Field names are the spec's (camelCase), so a validation error's location is the path the
author wrote. Known groups forbid unknown keys (a half-understood declaration never runs);
unknown top-level fields are dropped by the loader with a warning before these models see
the data. Groups the kernel does not interpret yet are typed loosely but kept as fields.

Alternatives (`- PreToolUse` or `{event, enforce}`) are tagged unions chosen by the input's
shape, so one wrong value gives exactly one error at the author's path.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)
from pydantic_core import PydanticCustomError

from shared.hook_events import EVENTS_BY_NAME

PLUGIN_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
CONTRACT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*@[0-9]+$")
RESERVED_PLUGIN_IDS = frozenset({"framework"})
RESERVED_ACTION_PREFIXES = ("covel:", "runtime:", "event:")
STAGES = ("setup", "pre-turn", "narrative", "post-turn", "audit")
# Kernel extension points: contracts the kernel composes itself (by their mode), not plugin contracts.
KERNEL_EXTENSION_POINTS = frozenset(
    {"prompt.segment@1", "session.world-context@1", "prompt.history-transform@1", "history.compact@2"}
)
BASE_ACTION_KINDS = frozenset({"say", "act", "narrate", "direct", "advance", "command"})
DATASET_OPS = ("set", "merge", "inc", "append", "insert", "remove", "upsertItem", "delete")
DATASET_TOOLS = ("get", "list", "upsert", "update")

Stage = Literal["setup", "pre-turn", "narrative", "post-turn", "audit"]
Cardinality = Literal["one", "all"]
Visibility = Literal["story", "system"]
TriggerType = Literal["auto", "manual", "event"]
LoopProfile = Literal["story", "actor", "system"]


class Strict(BaseModel):
    """A known group: unknown keys are errors naming the key."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, protected_namespaces=())


def _shape(*, scalar: type | tuple[type, ...]) -> Any:
    def pick(value: Any) -> str:
        return "scalar" if isinstance(value, scalar) else "object"

    return Discriminator(pick)


def either(scalar: Any, scalar_type: type | tuple[type, ...], obj: type[BaseModel]) -> Any:
    """`scalar` when the author wrote a scalar (string/bool), else the object form."""
    return Annotated[
        Annotated[scalar, Tag("scalar")] | Annotated[obj, Tag("object")],
        _shape(scalar=scalar_type),
    ]


# ----- checks shared by several fields ---------------------------------------------------------


def _contract_id(value: str) -> str:
    if not CONTRACT_ID.match(value):
        raise PydanticCustomError(
            "invalid-contract-id",
            "`{value}` is not a contract id: write a versioned name such as narrative-engine@2",
            {"value": value},
        )
    return value


def _hook_event(value: str) -> str:
    if value not in EVENTS_BY_NAME:
        raise PydanticCustomError(
            "unknown-hook-event",
            "`{value}` is not a hook event; one of: {events}",
            {"value": value, "events": ", ".join(EVENTS_BY_NAME)},
        )
    return value


def _action_name(value: str) -> str:
    if not value:
        raise PydanticCustomError("invalid-action", "an action name must not be empty")
    if value.startswith(RESERVED_ACTION_PREFIXES):
        raise PydanticCustomError(
            "reserved-action-prefix",
            "`{value}`: the prefixes covel:, runtime: and event: are reserved for the framework",
            {"value": value},
        )
    return value


def _https_link(value: str) -> str:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
    except ValueError:
        parts = None
    if parts is None or parts.scheme != "https" or not parts.hostname:
        raise PydanticCustomError(
            "insecure-link",
            "`{value}`: links must be https:// addresses (http:, javascript:, file: and the like are rejected)",
            {"value": value},
        )
    if parts.username is not None or parts.password is not None:
        raise PydanticCustomError(
            "insecure-link", "`{value}`: a link cannot carry a user name or password", {"value": value}
        )
    return value


ContractId = Annotated[str, AfterValidator(_contract_id)]
HttpsLink = Annotated[str, Field(min_length=1), AfterValidator(_https_link)]
HookEventName = Annotated[str, AfterValidator(_hook_event)]
ActionName = Annotated[str, AfterValidator(_action_name)]
NonEmpty = Annotated[str, Field(min_length=1)]
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]


# ----- runtime: schedule ------------------------------------------------------------------------


class DependencyRef(Strict):
    """An entry of `schedule.needs` / `schedule.after`: a runtime of this package or a contract."""

    runtime: NonEmpty | None = None
    contract: ContractId | None = None
    cardinality: Cardinality | None = None

    @model_validator(mode="after")
    def _one_target(self) -> DependencyRef:
        if (self.runtime is None) == (self.contract is None):
            raise PydanticCustomError("invalid-dependency", "write exactly one of `runtime` or `contract`")
        return self


if TYPE_CHECKING:  # what pydantic's tagged union holds, for the checker
    Dependency = str | DependencyRef
else:
    Dependency = either(NonEmpty, str, DependencyRef)


class Trigger(Strict):
    type: TriggerType | None = None
    startTurn: PositiveInt | None = None
    cooldownTurns: NonNegativeInt | None = None
    maxTriggerCount: PositiveInt | None = None
    # Event runtimes: the event topic(s) they follow.
    event: NonEmpty | None = None
    events: list[NonEmpty] | None = None


class DetachedOptions(Strict):
    settle: bool | None = None
    maxSettleWaitMs: Annotated[int, Field(ge=0, le=120000)] | None = None
    maxQueueMs: PositiveInt | None = None
    maxExecutionMs: PositiveInt | None = None
    coalesce: bool | None = None


class Schedule(Strict):
    stage: Stage | None = None
    every: PositiveInt | None = None
    trigger: Trigger | None = None
    needs: list[Dependency] | None = None
    after: list[Dependency] | None = None
    detached: either(bool, bool, DetachedOptions) | None = None  # type: ignore[valid-type]
    background: bool | None = None
    subagentOnly: bool | None = None


# ----- runtime: io ------------------------------------------------------------------------------


class InputSource(Strict):
    contract: ContractId | None = None
    runtime: NonEmpty | None = None
    kernel: NonEmpty | None = None
    cardinality: Cardinality | None = None

    @model_validator(mode="after")
    def _one_source(self) -> InputSource:
        written = [name for name in ("contract", "runtime", "kernel") if getattr(self, name) is not None]
        if len(written) != 1:
            raise PydanticCustomError("invalid-input-source", "write exactly one of `contract`, `runtime` or `kernel`")
        return self


class InputBinding(Strict):
    from_: InputSource = Field(alias="from")
    select: str | None = None
    accepts: NonEmpty | None = None
    scope: Literal["turn", "committed"] | None = None
    recordAs: NonEmpty | None = None
    required: bool | None = None


class SelfData(Strict):
    namespace: NonEmpty
    as_: NonEmpty | None = Field(default=None, alias="as")
    format: Literal["summary", "full"] | None = None
    maxEntries: PositiveInt | None = None


class Output(Strict):
    contract: ContractId | None = None
    schema_: NonEmpty | None = Field(default=None, alias="schema")
    recordAs: NonEmpty | None = None


class IO(Strict):
    inputs: dict[str, InputBinding] | None = None
    selfData: list[SelfData] | None = None
    payloadSchema: NonEmpty | dict[str, Any] | None = None
    output: Output | None = None
    visibility: Visibility | None = None
    concealed: bool | None = None


# ----- runtime: agent ---------------------------------------------------------------------------


class NamedToolChoice(Strict):
    name: NonEmpty


class HistoryWindow(Strict):
    maxTurns: NonNegativeInt | None = None
    includeSummaries: bool | None = None


class ServiceImport(Strict):
    contract: ContractId
    as_: NonEmpty | None = Field(default=None, alias="as")


DatasetToolKind = Literal["get", "list", "upsert", "update"]
DatasetOp = Literal["set", "merge", "inc", "append", "insert", "remove", "upsertItem", "delete"]


class DatasetImport(Strict):
    dataset: NonEmpty
    tools: list[DatasetToolKind] | None = None


class AgentTools(Strict):
    plugin: list[NonEmpty] | None = None
    services: list[either(ContractId, str, ServiceImport)] | None = None  # type: ignore[valid-type]
    datasets: list[either(NonEmpty, str, DatasetImport)] | None = None  # type: ignore[valid-type]


class Completion(Strict):
    require: Literal["tool-use", "explicit"] | None = None
    afterTools: list[NonEmpty] | None = None


class Finalizer(Strict):
    maxSteps: bool | None = None
    deadlineReserveMs: NonNegativeInt | None = None


class Corrections(Strict):
    toolUse: Annotated[int, Field(ge=0, le=3)] | None = None
    review: Annotated[int, Field(ge=0, le=5)] | None = None
    loopPerturbation: Annotated[int, Field(ge=0, le=3)] | None = None
    outputRepair: Annotated[int, Field(ge=0, le=3)] | None = None


class Loop(Strict):
    profile: LoopProfile | None = None
    timeoutMs: PositiveInt | None = None
    callTimeoutMs: PositiveInt | None = None
    maxRetries: Annotated[int, Field(ge=0, le=5)] | None = None
    maxSteps: PositiveInt | None = None
    firstTokenTimeoutMs: PositiveInt | None = None
    idleTimeoutMs: PositiveInt | None = None
    loopDetection: NonNegativeInt | None = None
    maxRecursionDepth: NonNegativeInt | None = None
    stream: bool | None = None
    steering: bool | None = None
    truncation: Literal["accept", "reject"] | None = None
    fallback: Literal["answer-without-tools", "fail"] | None = None
    finalizer: either(bool, bool, Finalizer) | None = None  # type: ignore[valid-type]
    corrections: Corrections | None = None


class Agent(Strict):
    model: NonEmpty | None = None
    toolChoice: either(Literal["auto", "required", "none"], str, NamedToolChoice) | None = None  # type: ignore[valid-type]
    reasoning: bool | None = None
    history: HistoryWindow | None = None
    tools: AgentTools | None = None
    finishWith: NonEmpty | None = None
    completion: Completion | None = None
    loop: Loop | None = None


# ----- runtime: function, permissions -----------------------------------------------------------


class Function(Strict):
    handler: NonEmpty | None = None
    model: NonEmpty | None = None
    timeoutMs: PositiveInt | None = None
    tools: list[NonEmpty] | None = None


class HttpPermission(Strict):
    origin: NonEmpty
    methods: list[Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]] | None = None


class Permissions(Strict):
    http: list[HttpPermission] | None = None


class RuntimeDecl(Strict):
    """A runtime as the author writes it: the inline `runtime:` block or a RUNTIME.md frontmatter."""

    # Derived from the `function` block; written, it must agree (validation warns that it is derived).
    type: Literal["function", "agent"] | None = None
    schedule: Schedule | None = None
    io: IO | None = None
    agent: Agent | None = None
    function: Function | None = None
    guard: NonEmpty | None = None
    effects: dict[str, Any] | None = None
    permissions: Permissions | None = None


RUNTIME_FIELDS = frozenset(RuntimeDecl.model_fields)


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
