"""StreamModelAnswer: a run_model_stream answer the plugin's PreLLMCall kept open (model_streams.py), relayed
as it comes: a chunk per piece of text, then a last chunk, `final` with the whole answer or `error` with what
went wrong (the stream raised, stalled, or its worker failed).

The pieces come in batches from the process that runs the plugin's code: this one (HookspecAdapter), or the
plugin's sandbox worker (SandboxedHookspecs), whose answers are checked here as the plugin's word. Each batch
waits at most PIECE_WAIT_S for a piece; a reader that goes away (the scheduler cancels) closes the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from covel.hooks.v1 import hooks_pb2
from shared.errors import not_found, require
from shared.logs import get_logger
from shared.sandbox import RemoteError, WorkerGone

log = get_logger(component="hookspecs")

# As agent.loop.idleTimeoutMs by default: the scheduler bounds each piece by the runtime's own, this by the service's.
PIECE_WAIT_S = 120.0
# A worker that answers a batch this much later than the batch's own bound is hung.
WORKER_SLACK_S = 5.0


def _checked(batch: Any) -> dict[str, Any]:
    """A batch as model_streams gives it ({pieces, final?, error?, missing?}); anything else fails the stream."""
    if isinstance(batch, dict):
        pieces = batch.get("pieces", [])
        ends = {key: batch[key] for key in ("final", "error", "missing") if key in batch}
        if isinstance(pieces, list) and all(isinstance(piece, str) for piece in pieces) and len(ends) <= 1 \
                and all(isinstance(value, str) for value in ends.values()):
            return {"pieces": pieces, **ends}
    return {"pieces": [], "error": "its worker answered something that is not a batch of the stream"}


async def _batch(hookspecs: Any, stream_id: str, session_id: str, claim: bool) -> dict[str, Any]:
    try:
        batch = await asyncio.wait_for(
            hookspecs.stream_batch(stream_id, session_id=session_id, claim=claim, wait_s=PIECE_WAIT_S),
            PIECE_WAIT_S + WORKER_SLACK_S)
    except (WorkerGone, RemoteError) as error:
        return {"pieces": [], "error": f"its worker failed: {error}"}
    except TimeoutError:
        return {"pieces": [], "error": f"its worker gave no answer within {PIECE_WAIT_S + WORKER_SLACK_S:g} s"}
    return _checked(batch)


def _hookspecs(loaded: list, plugin_id: str) -> Any:
    return next((plugin.hookspecs for plugin in loaded if plugin.entry.plugin_id == plugin_id and plugin.hookspecs is not None), None)


async def model_answer_chunks(loaded: list, request: hooks_pb2.StreamModelAnswerRequest
                              ) -> AsyncIterator[hooks_pb2.StreamModelAnswerChunk]:
    """The chunks of the stream `request` names; NOT_FOUND (naming the field) when there is no such plugin or stream."""
    session_id = require(request.context.session_id, "context.session_id", "the session of the model call")
    require(request.plugin_id, "plugin_id", "the plugin of replace.responseStream")
    stream_id = require(request.stream_id, "stream_id", "the streamId of replace.responseStream")
    hookspecs = _hookspecs(loaded, request.plugin_id)
    if hookspecs is None:
        raise not_found(f"plugin_id: no loaded plugin {request.plugin_id!r} has hookspec objects (its run_model_stream)",
                        "covel.registry.v1.PluginPackage", request.plugin_id, reason="PLUGIN_NOT_FOUND")
    first = await _batch(hookspecs, stream_id, session_id, claim=True)
    if "missing" in first:
        raise not_found(f"stream_id: {first['missing']}", "covel.hooks.v1.ModelAnswerStream", stream_id, reason="MODEL_STREAM_NOT_FOUND")
    ended = False
    try:
        batch = first
        while True:
            for piece in batch["pieces"]:
                yield hooks_pb2.StreamModelAnswerChunk(text=piece)
            ended = any(key in batch for key in ("final", "error", "missing"))
            if "final" in batch:
                yield hooks_pb2.StreamModelAnswerChunk(text=batch["final"], final=True)
            elif ended:
                log.warning("hookimpl.stream_failed", plugin_id=request.plugin_id, stream_id=stream_id,
                            error=batch.get("error") or batch.get("missing"))
                yield hooks_pb2.StreamModelAnswerChunk(error=batch.get("error") or batch.get("missing") or "")
            if ended:
                return
            batch = await _batch(hookspecs, stream_id, session_id, claim=False)
    finally:
        if not ended:
            # The reader went away (or a chunk could not be sent): the plugin's stream stops.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(hookspecs.close_stream(stream_id), WORKER_SLACK_S)
