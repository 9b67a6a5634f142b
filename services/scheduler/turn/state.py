"""What one turn owns as its stages run (TurnState): the runtimes' outcomes, statuses and outputs, the contracts
satisfied, the events emitted, what it queues and records; and the RuntimeScope it hands each runtime it starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Runtime
from services.scheduler.execution.framework_trace import lorebook_used
from services.scheduler.execution.origins import TurnOrigin
from services.scheduler.execution.outcome import OutcomeStatus, Resume, RuntimeOutcome
from services.scheduler.execution.runtime_scope import Emit, RuntimeScope, unseen_events
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.hooks.bus import ExecutionScope
from services.scheduler.kinds import ActionSource
from services.scheduler.player_message import action_dict
from services.scheduler.turn.activity import OperationNote, TurnActivity
from services.scheduler.turn.retry_seeds import RetrySource, operation_entries
from services.scheduler.world_records import dimension_records
from shared.manifest import CompiledManifest
from shared.structs import from_struct


@dataclass
class TurnState:
    """What the stages of one turn keep as they run."""

    # What its runtimes read and share (the session, packages, history, world, reads made once, proposals so far).
    shared: TurnShared
    outcomes: dict[str, RuntimeOutcome] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
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
    activation: dict[str, Any] | None = None
    # Event followers: runtime id -> {"events": [...]} that triggered it.
    activations: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Events of successful runtimes this turn, in order: {topic, payload, source}.
    emitted: list[dict[str, Any]] = field(default_factory=list)
    # The turn's event stream (concealed runtimes hidden): runtimes' progress and story text go onto it.
    emit: Emit = unseen_events
    # Detached runtimes this turn queues (enqueued by the commit, only if the turn commits).
    detached_jobs: list[store_pb2.DetachedJobSpec] = field(default_factory=list)
    # A detached job's run: its inputs as the source turn bound them (committed ones are read anew).
    source_inputs: dict[str, Any] | None = None
    # Runtimes whose status a PostRuntime hook changed.
    rewritten: set[str] = field(default_factory=set)
    # The tool and service calls of the turn's runtimes (turn-digest@1, operations@1).
    activity: TurnActivity = field(default_factory=TurnActivity)
    # This turn's player input as a PlayerInputSubmission: its id and when it was submitted (ISO).
    player_input_id: str = ""
    started_at: str = ""
    # runtime id -> the units whose staged operations its operations@1 input read.
    operation_reads: dict[str, set[str]] = field(default_factory=dict)
    # runtime id -> the inputs it was bound; the runtimes the schedule picked this turn (turn/settlements.py).
    bound_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    scheduled: list[str] = field(default_factory=list)
    # runtime id -> the proposals it sees as it starts, when a stage runs it once its own upstream finished
    # (turn/stages.py; absent: every finished unit's, what shared.proposals holds).
    visible: dict[str, list[store_pb2.Proposal]] = field(default_factory=dict)
    # The open receipt a settlement retry (origin "settlement") runs for.
    retry_from_turn_id: str = ""
    # A RetryTurn's turn: the committed turn it runs again (ctx.execution.sourceTurnId) and its committed operations.
    retry: RetrySource | None = None
    # A resumed agent's saved run and the answer (origin "resume"; agent/suspension.py).
    resume: Resume | None = None
    _last_player_input: dict[str, Any] | None = field(default=None, init=False, repr=False)

    def runtime_scope(self, runtime: Runtime, manifest: CompiledManifest, scope: ExecutionScope) -> RuntimeScope:
        """What the runtime's execution gets as it starts: its kernel inputs are built only when it declares one
        (they list every runtime that finished: built for each of a turn's N runtimes they cost N²)."""
        triggered_by_event = runtime.runtime_id in self.activations
        visible = self.visible.get(runtime.runtime_id)
        return RuntimeScope(
            turn=self.shared if visible is None else self.shared.seeing(visible), emit=self.emit, outputs=self.outputs, providers=self.providers,
            kernel_inputs=self.kernel_inputs(scope) if manifest.io.kernel_inputs() else None,
            last_player_input=self.last_player_input(scope),
            activation=self.activations.get(runtime.runtime_id) or self.activation or {},
            # Event followers have no player actions of their own (spec).
            player_actions=() if triggered_by_event else tuple(action_dict(action) for action in self.actions),
            origin=self.origin, source_inputs=self.source_inputs, source_turn_id=self.retry.turn_id if self.retry else "",
        )

    def kernel_inputs(self, scope: ExecutionScope) -> dict[str, Any]:
        """turn-digest@1 and operations@1 as they stand when a runtime starts: what the runtimes
        that already finished did (a runtime still running is not predicted to succeed)."""
        committable = self._committable_units()
        concealed = {runtime_id for runtime_id, manifest in self.shared.manifests.items() if manifest.io.concealed}
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
            # The lorebook entries the story's prompt had, by their activation rules (docs/worlds.md, "Lorebook").
            "lorebook": [used for outcome in self.outcomes.values() if outcome.story is not None and outcome.status == OutcomeStatus.SUCCESS
                         for used in lorebook_used(outcome.trace)],
        }
        if scope.session.locale:
            digest["locale"] = scope.session.locale
        # A retry's seeds first: what its source turn committed (turn/retry_seeds.py).
        operations = [*(self.retry.operations if self.retry else ()), *(note.value() for note in self._committable_operations(committable))]
        inputs = {"turn-digest@1": digest, "operations@1": {"operations": operations}, "world.dimensions@1": self.dimensions_snapshot()}
        if self.shared.world_context is not None:
            inputs["session.world-context@1"] = self.shared.world_context
        return inputs

    def dimensions_snapshot(self) -> dict[str, Any]:
        """world.dimensions@1: {id: {name, description?, schema, value, version}} as the turn found them (committed,
        frozen for the turn: what upstream runtimes propose shows in ctx.world.dimensions, not here)."""
        return {key: {field: value for field, value in record.items() if field != "description" or value}
                for key, record in dimension_records(self.shared.world).items()}

    def operation_entries(self) -> list[dict[str, Any]]:
        """The trace entries that keep the turn's committable operations (not a concealed runtime's) for a retry of it."""
        concealed = {runtime_id for runtime_id, manifest in self.shared.manifests.items() if manifest.io.concealed}
        return operation_entries((note.unit, note.value()) for note in self._committable_operations(self._committable_units())
                                 if note.unit not in concealed)

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
        world = self.shared.world
        records = world.open_interactions if world is not None else []
        found = next((record.interaction for record in records if record.interaction.id == interaction_id), None)
        return (found.form_id or found.id) if found is not None else interaction_id

    def last_player_input(self, scope: ExecutionScope) -> dict[str, Any] | None:
        """The latest PlayerInputSubmission when the execution started: this turn's own player input,
        else the latest player message of the history; frozen once per turn."""
        if self._last_player_input is not None:
            return self._last_player_input or None
        submission: dict[str, Any] = {}
        player_actions = [action for action in self.actions if action.source != ActionSource.SYSTEM]
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
            message = next((m for m in reversed(self.shared.history) if m.role == "player"), None)
            if message is not None:
                submission = {"id": message.id, "sessionId": message.session_id, "turnId": message.turn_id, "formId": None,
                              "values": {"text": message.text},
                              "createdAt": message.created_at.ToJsonString() if message.HasField("created_at") else None}
        self._last_player_input = submission
        return submission or None
