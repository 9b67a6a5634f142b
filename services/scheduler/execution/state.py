"""What one turn's stages share as they run, and the turn a scheduler is running (for Cancel)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Package, Runtime
from services.scheduler.execution.inputs import CommittedExports
from services.scheduler.execution.model_view import model_facing
from services.scheduler.execution.origins import TurnOrigin
from services.scheduler.execution.outcome import OutcomeStatus, Resume, RuntimeOutcome
from services.scheduler.hooks.bus import ExecutionScope
from services.scheduler.player_message import action_dict
from services.scheduler.world_records import dimension_records
from shared.manifest import CompiledManifest
from shared.plugin_data.execution_view import BufferedWrite
from shared.plugin_sdk import CancellationSignal
from shared.structs import from_struct

# operations@1: a request or result whose model view is longer than this (as JSON) is left out.
MAX_OPERATION_PART_CHARS = 4000
# turn-digest@1: one tool call's summary line.
MAX_TOOL_SUMMARY_CHARS = 200

T = TypeVar("T")


@dataclass
class RunningTurn:
    turn_id: str
    task: asyncio.Task
    cancel_reason: str = ""
    # The cancellation signals of the handlers running in this turn.
    signals: list[CancellationSignal] = field(default_factory=list)


@dataclass
class TurnState:
    """What the stages of one turn share as they run."""

    history: list[common_pb2.Message]
    packages: dict[str, Package]
    # runtime id -> its compiled manifest, for every runtime of the turn's packages.
    manifests: dict[str, CompiledManifest] = field(default_factory=dict)
    proposals: list[store_pb2.Proposal] = field(default_factory=list)
    outcomes: dict[str, RuntimeOutcome] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, dict] = field(default_factory=dict)
    # Contracts a runtime of this turn has produced successfully.
    satisfied: set[str] = field(default_factory=set)
    # runtime id -> upstream runtimes whose buffered plugin data it read / whose success it needed.
    read_from: dict[str, set[str]] = field(default_factory=dict)
    needs: dict[str, set[str]] = field(default_factory=dict)

    # contract -> runtimes that produced it successfully this turn, in completion order.
    providers: dict[str, list[str]] = field(default_factory=dict)
    actions: list[common_pb2.PlayerAction] = field(default_factory=list)
    player_message: str = ""
    origin: str = TurnOrigin.PLAYER
    activation: dict | None = None
    # Event followers: runtime id -> {"events": [...]} that triggered it.
    activations: dict[str, dict] = field(default_factory=dict)
    # Events of successful runtimes this turn, in order: {topic, payload, source}.
    emitted: list[dict] = field(default_factory=list)
    # The session's committed exports (recordAs), read once when a committed-scope input needs them.
    exports: CommittedExports | None = None
    # The committed world model (GetWorldResponse), read with the turn's lease.
    world: Any = None
    # Sends a ctx.progress report to the client's stream (set by the turn runner).
    send_progress: Any = None
    # Detached runtimes this turn queues (enqueued by the commit, only if the turn commits).
    detached_jobs: list[store_pb2.DetachedJobSpec] = field(default_factory=list)
    # A detached job's run: its inputs as the source turn bound them (committed ones are read anew).
    source_inputs: dict[str, Any] | None = None
    # The session as the turn found it (phase, setup progress).
    session: store_pb2.Session | None = None
    # Runtimes whose status a PostRuntime hook changed.
    rewritten: set[str] = field(default_factory=set)
    # The tool and service calls of the turn's runtimes (turn-digest@1, operations@1).
    activity: TurnActivity = field(default_factory=lambda: TurnActivity())
    # The subagent providers of the session's packages, found once per turn (subagent_providers()).
    _subagent_providers: list[tuple[Runtime, CompiledManifest]] | None = field(default=None, init=False, repr=False)
    # Reads of the turn's shared data (the world, the exports, committed plugin data), in flight or done (read_once()).
    _reads: dict[str, asyncio.Future] = field(default_factory=dict, init=False, repr=False)
    # plugin id -> its plugin.data* proposals as buffered writes, in order; and how many proposals that covers.
    _plugin_data_writes: dict[str, list[BufferedWrite]] = field(default_factory=dict, init=False, repr=False)
    _proposals_indexed: int = field(default=0, init=False, repr=False)

    def plugin_data_writes(self, plugin_id: str) -> list[BufferedWrite]:
        """The plugin's plugin.data* proposals so far (runtimes that finished), in order, as buffered writes.
        Each proposal is converted once, as it comes (proposals only grow during the stages): every runtime's
        ctx.plugin_data converted them all, N² from_struct calls for N runtimes that write."""
        for proposal in self.proposals[self._proposals_indexed:]:
            if proposal.type.startswith("plugin.data"):
                write = BufferedWrite(proposal.runtime_id, proposal.type, from_struct(proposal.payload))
                self._plugin_data_writes.setdefault(proposal.plugin_id, []).append(write)
        self._proposals_indexed = len(self.proposals)
        return list(self._plugin_data_writes.get(plugin_id, ()))

    async def read_once(self, name: str, read: Callable[[], Awaitable[T]]) -> T:
        """`read()`'s value, read once per turn: a layer's runtimes start together and all await the one
        read in flight (each sent its own before: a layer of 67 function runtimes made 67 GetWorld calls).
        A read that failed is tried again by the next caller; a caller cancelled does not cancel it for the others."""
        pending = self._reads.get(name)
        if pending is None:
            pending = self._reads[name] = asyncio.ensure_future(read())
        try:
            return await asyncio.shield(pending)
        except Exception:
            if self._reads.get(name) is pending and pending.done():
                del self._reads[name]
            raise

    def seed(self, name: str, value: Any) -> None:
        """A read the turn already has (its lease answered it): read_once(name) returns it without reading."""
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        done.set_result(value)
        self._reads[name] = done

    def read_names(self) -> list[str]:
        """The names of the reads this turn made (or was seeded with) that succeeded, in order."""
        return [name for name, read in self._reads.items() if read.done() and not read.cancelled() and read.exception() is None]

    def subagent_providers(self) -> list[tuple[Runtime, CompiledManifest]]:
        """(runtime, manifest) of every subagentOnly agent runtime in the turn's packages, found once:
        every function runtime's ctx.agents needs it."""
        if self._subagent_providers is None:
            self._subagent_providers = [
                (runtime, runtime.manifest) for package in self.packages.values() for runtime in package.runtimes
                if runtime.type == "agent" and runtime.manifest.schedule.subagent_only
            ]
        return self._subagent_providers
    # This turn's player input as a PlayerInputSubmission: its id and when it was submitted (ISO).
    player_input_id: str = ""
    started_at: str = ""
    # runtime id -> the units whose staged operations its operations@1 input read.
    operation_reads: dict[str, set[str]] = field(default_factory=dict)
    _last_player_input: dict[str, Any] | None = None
    # runtime id -> the inputs it was bound; the runtimes the schedule picked this turn (turn/settlements.py).
    bound_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    scheduled: list[str] = field(default_factory=list)
    # The open receipt a settlement retry (origin "settlement") runs for.
    retry_from_turn_id: str = ""
    # A resumed agent's saved run and the answer (origin "resume"; agent/suspension.py).
    resume: Resume | None = None
    # session.world-context@1, once a runtime of the turn bound it (execution/world_context.py).
    world_context: dict[str, Any] | None = None

    def output_contracts(self) -> dict[str, str]:
        """runtime id -> its io.output.contract, for every runtime of the session's packages."""
        return {
            runtime_id: contract for runtime_id, manifest in self.manifests.items() if (contract := manifest.io.output.contract)
        }

    def kernel_inputs(self, scope: ExecutionScope) -> dict[str, Any]:
        """turn-digest@1 and operations@1 as they stand when a runtime starts: what the runtimes
        that already finished did (a runtime still running is not predicted to succeed)."""
        committable = self._committable_units()
        concealed = {runtime_id for runtime_id, manifest in self.manifests.items() if manifest.io.concealed}
        narrative = "\n\n".join(
            outcome.story.narrative_output for outcome in self.outcomes.values() if outcome.story is not None and outcome.status == OutcomeStatus.SUCCESS
        )
        digest = {
            "turnId": scope.turn_id,
            "playerMessage": self.player_message,
            "actions": [action_dict(action) for action in self.actions],
            "lastPlayerInput": self.last_player_input(scope),
            "narrativeText": narrative,
            "toolCallSummaries": [note.summary for note in self.activity.tool_calls
                                  if note.ok and note.unit in committable and note.unit not in concealed],
            "runtimeResults": [{"runtimeId": runtime_id, "status": status} for runtime_id, status in self.statuses.items()],
        }
        if scope.session.locale:
            digest["locale"] = scope.session.locale
        operations = [note.value() for note in self._committable_operations(committable)]
        inputs = {"turn-digest@1": digest, "operations@1": {"operations": operations}, "world.dimensions@1": self.dimensions_snapshot()}
        if self.world_context is not None:
            inputs["session.world-context@1"] = self.world_context
        return inputs

    def dimensions_snapshot(self) -> dict[str, Any]:
        """world.dimensions@1: {id: {name, description?, schema, value, version}} as the turn found them (committed,
        frozen for the turn: what upstream runtimes propose shows in ctx.world.dimensions, not here)."""
        return {key: {field: value for field, value in record.items() if field != "description" or value}
                for key, record in dimension_records(self.world).items()}

    def operation_units(self) -> set[str]:
        """The units whose staged operations operations@1 hands a runtime starting now: a reader
        commits only if they do (a commit dependency, not a scheduling one)."""
        return {note.unit for note in self._committable_operations(self._committable_units())}

    def _committable_units(self) -> set[str]:
        return {runtime_id for runtime_id, outcome in self.outcomes.items() if outcome.status == OutcomeStatus.SUCCESS or outcome.guard_skipped}

    def _committable_operations(self, committable: set[str]) -> list[OperationNote]:
        """Operations of finished committable units still staged with them: not those of a nested
        run or subagent that failed (their writes were withdrawn from the unit)."""
        kept = []
        for note in self.activity.operations:
            if note.unit not in committable:
                continue
            staged = self.outcomes[note.unit].foreign_writes
            if all(any(w.get("type") == kind and w.get("payload") == payload for w in staged) for kind, payload in note.staged):
                kept.append(note)
        return kept

    def answered_form(self, interaction_id: str) -> str:
        """The form an answer of this turn answers: the interaction's formId, else its id (it was open at the lease)."""
        records = self.world.open_interactions if self.world is not None else []
        found = next((record.interaction for record in records if record.interaction.id == interaction_id), None)
        return (found.form_id or found.id) if found is not None else interaction_id

    def last_player_input(self, scope: ExecutionScope) -> dict[str, Any] | None:
        """The latest PlayerInputSubmission when the execution started: this turn's own player input,
        else the latest player message of the history; frozen once per turn."""
        if self._last_player_input is not None:
            return self._last_player_input or None
        submission: dict[str, Any] = {}
        player_actions = [action for action in self.actions if action.source != "system"]
        if player_actions:
            values: dict[str, Any] = {"text": self.player_message}
            form_id = None
            for action in player_actions:
                values.update(from_struct(action.fields) if action.HasField("fields") else {})
                if action.HasField("interaction"):
                    # An answer to a form: its values, and the form (its formId, else the interaction's id).
                    values.update(from_struct(action.interaction.values))
                    form_id = self.answered_form(action.interaction.id)
            submission = {"id": self.player_input_id or scope.turn_id, "sessionId": scope.session.id, "turnId": scope.turn_id,
                          "formId": form_id, "values": values, "createdAt": self.started_at or None}
        else:
            message = next((m for m in reversed(self.history) if m.role == "player"), None)
            if message is not None:
                submission = {"id": message.id, "sessionId": message.session_id, "turnId": message.turn_id, "formId": None,
                              "values": {"text": message.text},
                              "createdAt": message.created_at.ToJsonString() if message.HasField("created_at") else None}
        self._last_player_input = submission
        return submission or None


@dataclass
class ToolCallNote:
    """One plugin tool or service call of the turn, for turn-digest@1's toolCallSummaries."""

    unit: str
    ok: bool
    summary: str


@dataclass
class OperationNote:
    """One write-service call that staged changes (operations@1), in call order."""

    unit: str
    contract: str
    summary: str
    request: Any
    result: Any
    # (type, payload) of each change it staged: it counts while they stay with its unit.
    staged: list[tuple[str, Any]] = field(default_factory=list)

    def value(self) -> dict[str, Any]:
        operation: dict[str, Any] = {"contract": self.contract, "summary": self.summary}
        truncated = False
        for name, part in (("request", self.request), ("result", self.result)):
            if part is None:
                continue
            shown = model_facing(part)
            if len(json.dumps(shown, ensure_ascii=False)) > MAX_OPERATION_PART_CHARS:
                truncated = True
            else:
                operation[name] = shown
        if truncated:
            operation["truncated"] = True
        return operation


@dataclass
class TurnActivity:
    """The tool and service calls of one turn, each noted against its unit (the top-level runtime)."""

    tool_calls: list[ToolCallNote] = field(default_factory=list)
    operations: list[OperationNote] = field(default_factory=list)


# The turn's activity and the unit (top-level runtime) an await chain runs for: calls made anywhere
# below a runtime (its tools, nested calls, subagents) are noted against it.
RUNNING_UNIT: ContextVar[tuple[TurnActivity, str] | None] = ContextVar("covel_running_unit", default=None)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(model_facing(value), ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


class RecordingHooks:
    """The hook bus, noting each plugin tool and service call of a running unit for turn-digest@1
    (toolCallSummaries) and operations@1 (write services' staged changes)."""

    def __init__(self, hooks: Any) -> None:
        self._bus = hooks

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bus, name)

    async def call_tool(self, scope: ExecutionScope, plugin_id: str, runtime_id: str, call: dict[str, Any],
                        writes: list[dict[str, Any]] | None = None, plugin_data: dict[str, Any] | None = None) -> str:
        text = await self._bus.call_tool(scope, plugin_id, runtime_id, call, writes, plugin_data=plugin_data)
        running = RUNNING_UNIT.get()
        if running is not None:
            try:
                result = json.loads(text)
                arguments = json.loads(call.get("arguments") or "{}")
            except (TypeError, ValueError):
                result, arguments = {}, call.get("arguments")
            ok = isinstance(result, dict) and result.get("ok") is True
            summary = f"{runtime_id} called {call.get('name')}({_short(arguments)})"
            if ok and result.get("data") is not None:
                summary += f" -> {_short(result['data'])}"
            running[0].tool_calls.append(ToolCallNote(running[1], ok, summary[:MAX_TOOL_SUMMARY_CHARS]))
        return text

    async def call_service(self, scope: ExecutionScope, caller_plugin_id: str, runtime_id: str, contract: str, arguments: str,
                           plugin_data: dict[str, Any] | None = None) -> Any:
        reply = await self._bus.call_service(scope, caller_plugin_id, runtime_id, contract, arguments, plugin_data=plugin_data)
        running = RUNNING_UNIT.get()
        if running is not None:
            try:
                request = json.loads(arguments or "{}")
            except ValueError:
                request = arguments
            try:
                result = json.loads(reply.result)
            except (TypeError, ValueError):
                result = None
            data = result.get("data") if isinstance(result, dict) else None
            running[0].tool_calls.append(ToolCallNote(
                running[1], bool(reply.ok), f"{runtime_id} called the service {contract}({_short(request)})"[:MAX_TOOL_SUMMARY_CHARS]))
            if reply.ok and reply.proposals:
                given = data.get("summary") if isinstance(data, dict) else None
                summary = given if isinstance(given, str) else f"{contract} staged {', '.join(p.type for p in reply.proposals)}"
                staged = [(p.type, from_struct(p.payload)) for p in reply.proposals]
                running[0].operations.append(OperationNote(running[1], contract, summary[:MAX_TOOL_SUMMARY_CHARS], request, data, staged))
        return reply
