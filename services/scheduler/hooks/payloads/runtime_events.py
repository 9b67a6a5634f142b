"""One runtime's hook payloads around its run and its proposals: PreRuntime, PostRuntime, PreStateCommit and PostStateCommit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from covel.store.v1 import store_pb2
from services.scheduler.hooks.payloads.base import HookPayload
from shared.structs import from_struct


@dataclass(frozen=True)
class PreRuntime(HookPayload):
    """Once before a runtime: `{manifest, input}`: its compiled manifest with `runtimeId` and `stage`, and the turn's
    input as it reaches this runtime `{playerMessage, playerActions, origin, activation}`."""

    event: ClassVar[str] = "PreRuntime"
    runtime_id: str
    stage: str
    player_message: str
    manifest: Mapping[str, Any] = field(default_factory=dict)
    player_actions: Sequence[Mapping[str, Any]] = ()
    origin: str = ""
    activation: Mapping[str, Any] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        return {"manifest": {**self.manifest, "runtimeId": self.runtime_id, "stage": self.stage},
                "input": {"playerMessage": self.player_message, "playerActions": [dict(a) for a in self.player_actions],
                          "origin": self.origin, "activation": dict(self.activation)}}


@dataclass(frozen=True)
class PostRuntime(HookPayload):
    """Once after a runtime ends: `{result, resumed?}`. `result` is the runtime's result as hooks are shown it
    (turn/unit_outcome.py post_runtime_result); `resumed: true` only when a suspended run ended."""

    event: ClassVar[str] = "PostRuntime"
    result: dict[str, Any]
    resumed: bool = False

    def wire(self) -> dict[str, Any]:
        return {"result": self.result, **({"resumed": True} if self.resumed else {})}


def proposal_view(proposal: store_pb2.Proposal) -> dict[str, Any]:
    """A proposal as PreStateCommit and PostStateCommit show it: `{id, type, payload}`."""
    return {"id": proposal.id, "type": proposal.type, "payload": from_struct(proposal.payload)}


@dataclass(frozen=True)
class PreStateCommit(HookPayload):
    """Before a proposal is committed: `{proposal: {id, type, payload}}`."""

    event: ClassVar[str] = "PreStateCommit"
    proposal: store_pb2.Proposal

    def wire(self) -> dict[str, Any]:
        return {"proposal": proposal_view(self.proposal)}


@dataclass(frozen=True)
class PostStateCommit(HookPayload):
    """After a proposal was committed: `{proposal: {id, type, payload}, result: {committed}}`."""

    event: ClassVar[str] = "PostStateCommit"
    proposal: store_pb2.Proposal
    committed: bool = True

    def wire(self) -> dict[str, Any]:
        return {"proposal": proposal_view(self.proposal), "result": {"committed": self.committed}}
