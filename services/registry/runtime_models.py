"""Pydantic models of a runtime declaration (a RUNTIME.md or PLUGIN.md `runtime:`): schedule, io, agent,
loop, function, permissions. Field names are the spec's (camelCase), so an error's location is the author's path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    Field,
    model_validator,
)
from pydantic_core import PydanticCustomError

from services.registry.manifest_fields import (
    Cardinality,
    ContractId,
    LoopProfile,
    NonEmpty,
    NonNegativeInt,
    PositiveInt,
    Stage,
    Strict,
    TriggerType,
    Visibility,
    either,
)

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


class Effects(Strict):
    reads: list[NonEmpty] | None = None
    writes: list[NonEmpty] | None = None
    parallelSafe: bool | None = None


class RuntimeDecl(Strict):
    """A runtime as the author writes it: the inline `runtime:` block or a RUNTIME.md frontmatter."""

    # Derived from the `function` block; written, it must agree (validation warns that it is derived).
    type: Literal["function", "agent"] | None = None
    schedule: Schedule | None = None
    io: IO | None = None
    agent: Agent | None = None
    function: Function | None = None
    guard: NonEmpty | None = None
    effects: Effects | None = None
    permissions: Permissions | None = None


RUNTIME_FIELDS = frozenset(RuntimeDecl.model_fields)
