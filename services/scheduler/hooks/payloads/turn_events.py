"""The turn's hook payloads: TurnStart, PreCompaction, PostCompaction, PreSchedule and TurnStop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Runtime
from services.scheduler.hooks.payloads.base import HookPayload, runtime_manifest
from services.scheduler.player_message import action_dict
from shared.structs import from_struct


@dataclass(frozen=True)
class TurnStart(HookPayload):
    """When an execution starts: `{playerMessage, actions, activeRuntimes}` (each action as ctx.playerActions carries it)."""

    event: ClassVar[str] = "TurnStart"
    player_message: str
    actions: Sequence[common_pb2.PlayerAction]
    active_runtimes: Sequence[str]

    def wire(self) -> dict[str, Any]:
        return {
            "playerMessage": self.player_message,
            "actions": [action_dict(action) for action in self.actions],
            "activeRuntimes": list(self.active_runtimes),
        }


@dataclass(frozen=True)
class PreCompaction(HookPayload):
    """Before history compaction: `{messageCount}` (the messages the compaction would fold)."""

    event: ClassVar[str] = "PreCompaction"
    message_count: int

    def wire(self) -> dict[str, Any]:
        return {"messageCount": self.message_count}


@dataclass(frozen=True)
class PostCompaction(HookPayload):
    """After a compaction attempt that was not blocked: `{compacted, summaryId?}` (the summary's proposal id when one was written)."""

    event: ClassVar[str] = "PostCompaction"
    summary_id: str | None = None

    def wire(self) -> dict[str, Any]:
        return {"compacted": self.summary_id is not None, **({"summaryId": self.summary_id} if self.summary_id is not None else {})}


@dataclass(frozen=True)
class TriggeredRuntime:
    """One runtime the turn selected, as PreSchedule shows it: its compiled manifest (runtime_manifest), with `name`."""

    name: str
    stage: str
    visibility: str
    plugin_id: str
    manifest: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, runtime: Runtime) -> TriggeredRuntime:
        return cls(runtime.runtime_id, runtime.stage, runtime.visibility, runtime.plugin_id, runtime_manifest(runtime))

    def wire(self) -> dict[str, Any]:
        return {**self.manifest, "name": self.name, "stage": self.stage, "visibility": self.visibility, "pluginId": self.plugin_id}


@dataclass(frozen=True)
class PreSchedule(HookPayload):
    """After the runtimes are selected: `{triggered: [manifest with name, stage, visibility, pluginId]}`."""

    event: ClassVar[str] = "PreSchedule"
    triggered: Sequence[TriggeredRuntime]

    @classmethod
    def of(cls, selected: Sequence[Runtime]) -> PreSchedule:
        return cls(tuple(TriggeredRuntime.of(runtime) for runtime in selected))

    def wire(self) -> dict[str, Any]:
        return {"triggered": [runtime.wire() for runtime in self.triggered]}


@dataclass(frozen=True)
class TurnStop(HookPayload):
    """When an execution has run its runtimes, before the commit: `{runtimeResults: [{runtimeId, pluginId, status,
    reason?, output, durationMs}], durationMs}` (a concealed runtime's output too: hooks are not clients)."""

    event: ClassVar[str] = "TurnStop"
    runtime_results: Sequence[store_pb2.RuntimeResult]
    duration_ms: int

    def wire(self) -> dict[str, Any]:
        return {"runtimeResults": [_result_view(result) for result in self.runtime_results], "durationMs": self.duration_ms}


def _result_view(result: store_pb2.RuntimeResult) -> dict[str, Any]:
    view: dict[str, Any] = {"runtimeId": result.runtime_id, "pluginId": result.plugin_id, "status": result.status}
    if result.reason:
        view["reason"] = result.reason
    return {**view, "output": from_struct(result.output), "durationMs": result.duration_ms}
