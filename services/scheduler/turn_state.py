"""What one turn's stages share as they run, and the turn a scheduler is running (for Cancel)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2
from covel.store.v1 import store_pb2
from services.scheduler.agent_runtime import RuntimeOutcome
from services.scheduler.hook_bus import ExecutionScope
from services.scheduler.inputs import CommittedExports
from services.scheduler.player_input import action_dict
from shared.plugin_sdk import CancellationSignal


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
    packages: dict[str, registry_pb2.PluginPackage]
    # runtime id -> its compiled manifest as a dict, converted once per turn.
    manifests: dict[str, dict[str, Any]] = field(default_factory=dict)
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
    origin: str = "player"
    activation: dict | None = None
    # Event followers: runtime id -> {"events": [...]} that triggered it.
    activations: dict[str, dict] = field(default_factory=dict)
    # Events of successful runtimes this turn, in order: {topic, payload, source}.
    emitted: list[dict] = field(default_factory=list)
    # The session's committed exports (recordAs), read once when a committed-scope input needs them.
    exports: CommittedExports | None = None
    # The committed world model (GetWorldResponse), read once when a function ctx needs it.
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

    def output_contracts(self) -> dict[str, str]:
        """runtime id -> its io.output.contract, for every runtime of the session's packages."""
        return {
            runtime_id: contract for runtime_id, manifest in self.manifests.items()
            if (contract := ((manifest.get("io") or {}).get("output") or {}).get("contract"))
        }

    def kernel_inputs(self, scope: ExecutionScope) -> dict[str, Any]:
        """turn-digest@1 and operations@1 as they stand when a runtime starts."""
        narrative = "\n\n".join(
            outcome.story.narrative_output for outcome in self.outcomes.values() if outcome.story is not None
        )
        last_input = next((m for m in reversed(self.history) if m.role == "player"), None)
        digest = {
            "turnId": scope.turn_id,
            "playerMessage": self.player_message,
            "actions": [action_dict(action) for action in self.actions],
            "lastPlayerInput": (
                {"id": last_input.id, "sessionId": last_input.session_id, "turnId": last_input.turn_id, "values": {"text": last_input.text}}
                if last_input is not None else None
            ),
            "narrativeText": narrative,
            "toolCallSummaries": [],
            "runtimeResults": [{"runtimeId": runtime_id, "status": status} for runtime_id, status in self.statuses.items()],
            "locale": scope.session.locale,
        }
        # Write-service operations arrive with the agent loop's service tools; none are staged yet.
        return {"turn-digest@1": digest, "operations@1": {"operations": []}}
