"""The hooks service's worker operations as types: each operation's arguments (host to worker) and its reply
(worker to host), msgspec Structs on the frames of shared/sandbox/protocol.py. The host decodes every reply
against its type (the worker runs plugin code: a wrong-typed field fails the call with a ProtocolError naming
it); the worker decodes the arguments the same way. Plugin values (payloads, results, tool input) stay `Any`:
JSON data, checked where the host reads them (the dispatcher, the tool host).
"""

from __future__ import annotations

from typing import Any

import msgspec


class _Message(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    pass


class View(_Message):
    """A hook's execution view (shared/plugin_sdk ExecutionView without the settings)."""

    event: str
    session_id: str
    turn_id: str
    locale: str
    active_plugin_ids: list[str]
    plugin_id: str | None = None
    runtime_id: str | None = None
    logical_turn: int | None = None
    execution_id: str | None = None
    root_execution_id: str | None = None
    subagent_call_id: str | None = None
    parent_runtime_id: str | None = None


# ----- load


class LoadArgs(_Message):
    root: str
    entry: str
    gen: int | None = None
    http_permissions: list[tuple[str, Any]] = []
    workspaces: str | None = None


class HookInfo(_Message):
    event: str
    timeout_ms: int
    enforce: str
    in_thread: bool
    match: dict[str, Any] | None = None
    observe: bool = False


class ToolInfo(_Message):
    name: str
    description: str
    parameters: Any = None
    read_only: bool = False


class ServiceInfo(_Message):
    contract: str
    model_facing: bool
    access: str
    callable: bool
    description: str = ""
    parameters: Any = None


class ExtensionInfo(_Message):
    point: str
    id: str
    order: int = 0
    slot: str | None = None


class EventHandlerInfo(_Message):
    key: str
    timeout_ms: int


class RpcInfo(_Message):
    action: str
    description: str = ""


class Registrations(_Message):
    """What register(covel) registered, as the host needs to know it (the code stays in the worker)."""

    hooks: list[HookInfo] = []
    tools: list[ToolInfo] = []
    services: list[ServiceInfo] = []
    extensions: list[ExtensionInfo] = []
    event_handlers: list[EventHandlerInfo] = []
    rpcs: list[RpcInfo] = []
    forms: list[str] = []
    hookspecs: list[str] | None = None
    # Why the entry failed to load (the load's reply; nothing else is set then).
    error: str | None = None


# ----- hook handlers


class HookArgs(_Message):
    """One handler (`i`) of generation `gen`."""

    i: int
    view: View
    payload: dict[str, Any]
    gen: int | None = None
    settings: dict[str, Any] = {}


class HookOutcome(_Message):
    """One handler's outcome: `status` ok (its return value `v`), skip (its match said no), or a failure
    (error, invalid-result, timeout) with its message; `us` how long it ran in the worker."""

    status: str = "ok"
    v: Any = None
    message: str = ""
    us: int = 0


class HooksArgs(_Message):
    """Several handlers of one plugin for one event, in one round trip (a batch): `chain` runs them in order, each
    seeing the payload as the ones before left it (a sequential event), else all at once (a parallel event).
    `guard`: a failure or an abort of a handler that does not only observe ends the batch (fail closed)."""

    items: list[int]
    timeouts_ms: list[int]
    view: View
    payload: dict[str, Any]
    chain: bool
    guard: bool
    replace_fields: list[str]
    gen: int | None = None
    settings: dict[str, Any] = {}


class ObservedArgs(_Message):
    """DispatchObserved: a plugin's watchers of several held events in one round trip, event after event; each
    event's handlers as a HooksArgs. Outcome positions count across the events, in order."""

    events: list[HooksArgs]


class HooksReply(_Message):
    """A batch ended (each handler's outcome came as a `hooks.outcome` note as it ended: [position, HookOutcome];
    a chain that ended early, at an abort or a guard's failure, has fewer). `running`: code of a handler that timed
    out still runs in a thread (the host replaces the worker)."""

    running: bool = False


# ----- tools, services, extension providers, actions, form validators


class ToolCallContext(_Message):
    session_id: str = ""
    turn_id: str = ""
    locale: str = ""
    runtime_id: str = ""
    logical_turn: int = 0
    turn_number: int = 0


class ToolArgs(_Message):
    kind: str
    i: int
    ctx: ToolCallContext
    input: Any = None
    gen: int | None = None
    settings: dict[str, Any] = {}
    data: dict[str, Any] = {}
    # context.world's values and context.store.get_session()'s view (None: the call came without them), and the
    # host's seeded random source (SeededRandom.snapshot(); empty: an unseeded one).
    world: dict[str, Any] | None = None
    session: dict[str, Any] | None = None
    random: dict[str, Any] = {}


class Proposal(_Message):
    type: str
    payload: dict[str, Any]


class ToolReply(_Message):
    v: Any = None
    proposals: list[Proposal] = []


# ----- gateway event-key handlers


class EventArgs(_Message):
    i: int
    key: str
    context: dict[str, Any]
    gen: int | None = None
    session_key: str | None = None
    timestamp: float = 0.0


class EventReply(_Message):
    context: dict[str, Any]


# ----- hookspec adapter, lifespans, model streams


class HookspecArgs(_Message):
    method: str
    gen: int | None = None
    tools: list[tuple[str, str]] = []
    view: View | None = None
    settings: dict[str, Any] = {}
    payload: dict[str, Any] = {}
    reason: str = ""
    context: dict[str, str] = {}
    call_id: str = ""
    name: str = ""
    arguments: str = ""
    session_id: str = ""
    message: dict[str, Any] = {}
    turn: dict[str, Any] = {}


class HookspecReply(_Message):
    """`found` and `v` for take_replacement; `v` for admit_message ({action, reason} or None)."""

    found: bool = False
    v: Any = None


class LifespansArgs(_Message):
    action: str
    gen: int | None = None
    load: int | None = None
    timeout_s: float = 0.0


class LifespansReply(_Message):
    load: int | None = None
    entered: list[str] = []


class ModelStreamArgs(_Message):
    method: str
    stream_id: str
    session_id: str = ""
    claim: bool = False
    wait_s: float = 0.0


# The stream's next batch ({pieces, done, error, missing, ...} as OpenStreams.next_batch answers): a JSON object,
# whose fields the host checks one by one (services/hooks/model_answers.py _checked).
ModelStreamReply = dict[str, Any]
