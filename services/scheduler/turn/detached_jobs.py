"""What a detached runtime's job carries: its inputs bound at the end of the turn (the source
snapshot, committed-scope ones left to be read anew), the source turn and its trace, and the
queue and run limits of schedule.detached."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Runtime
from shared.manifest import CompiledManifest
from shared.manifest.runtime import DetachedOptions
from shared.structs import to_struct

# The job snapshot's key for the W3C trace context of the turn that queued the job.
SOURCE_TRACE = "sourceTrace"
# The skip reason a detached runtime is recorded with in the turn that queues it.
QUEUED = "detached: queued to run after the turn commits"
# ... and a schedule.background event follower, queued as a job with the events that activated it.
BACKGROUND_QUEUED = "background: queued as a job to run after the turn commits"
# The job snapshot's key for a background runtime's activation payload ({events}).
ACTIVATION = "activation"


def detached_job(runtime: Runtime, options: DetachedOptions, manifest: CompiledManifest, inputs: Mapping[str, Any],
                 source_turn_id: str, trace_context: Any) -> store_pb2.DetachedJobSpec:
    committed = {b for b, spec in manifest.io.bindings().items() if spec.scope == "committed"}
    snapshot = {"inputs": {b: v for b, v in inputs.items() if b not in committed}, "sourceTurnId": source_turn_id,
                "maxSettleWaitMs": options.max_settle_wait_ms,
                # The job's trace links to the source turn's (detached/worker.py).
                SOURCE_TRACE: trace_context}
    return store_pb2.DetachedJobSpec(
        plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id, input=to_struct(snapshot),
        # 0: the store's own limits.
        settle=options.settle, max_queue_ms=options.max_queue_ms or 0, max_execution_ms=options.max_execution_ms or 0,
        coalesce=options.coalesce,
    )


def background_job(runtime: Runtime, activation: Mapping[str, Any], source_turn_id: str, trace_context: Any) -> store_pb2.DetachedJobSpec:
    """A schedule.background event follower's job: no inputs of the turn (it has no upstream in it), the events that
    activated it; the store's own queue and run limits."""
    snapshot = {"inputs": {}, ACTIVATION: dict(activation), "sourceTurnId": source_turn_id, SOURCE_TRACE: trace_context}
    return store_pb2.DetachedJobSpec(plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id, input=to_struct(snapshot))
