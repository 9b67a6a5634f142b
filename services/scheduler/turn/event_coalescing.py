"""Which turn events a SubmitActions / RunManual stream may send as one message (issue 19).

Consecutive story text of the same runtime and segment joins (clients concatenate the pieces, and
the joined pieces still equal the committed narrative); a reset, a paragraph break and every other
event go as they are, in their order (shared/stream_coalescing.py). A stream that asked for batches
(issue 39) also sends the events that are ready together as one batch, and lets the turn's bookkeeping
wait a moment for the next message (shared/stream_batching.py).
"""

from __future__ import annotations

from covel.scheduler.internal.v1 import turn_events_pb2
from services.scheduler.agent.story_stream import PARAGRAPH_BREAK
from shared.stream_batching import BATCHED
from shared.stream_coalescing import FLUSH_INTERVAL, MAX_JOINED_CHARS, NEVER

# What the player need not see the moment it happens: it rides with the next message of a batched stream.
BOOKKEEPING = frozenset({"runtime_started", "runtime_finished", "hook", "progress", "proposal"})


def _joinable(delta: turn_events_pb2.NarrativeDelta) -> bool:
    return not delta.reset and delta.text != PARAGRAPH_BREAK


def join_story_text(first: turn_events_pb2.TurnEvent, then: turn_events_pb2.TurnEvent) -> turn_events_pb2.TurnEvent | None:
    """One narrative_delta for two of the same runtime and segment, or None when they go apart."""
    if first.WhichOneof("event") != "narrative_delta" or then.WhichOneof("event") != "narrative_delta":
        return None
    before, after = first.narrative_delta, then.narrative_delta
    if not (_joinable(before) and _joinable(after) and before.runtime_id == after.runtime_id):
        return None
    if before.HasField("segment") != after.HasField("segment") or before.segment != after.segment:
        return None
    if len(before.text) + len(after.text) > MAX_JOINED_CHARS:
        return None
    joined = turn_events_pb2.TurnEvent()
    joined.CopyFrom(first)
    joined.narrative_delta.text += after.text
    return joined


def is_story_text(event: turn_events_pb2.TurnEvent) -> bool:
    return event.WhichOneof("event") == "narrative_delta" and not event.narrative_delta.reset


def how_held(event: turn_events_pb2.TurnEvent) -> str:
    """Story text may wait the flush interval for more of itself; nothing else waits."""
    return FLUSH_INTERVAL if is_story_text(event) else NEVER


def how_batched(event: turn_events_pb2.TurnEvent) -> str:
    """In a batched stream, bookkeeping may also wait the batch interval for company; story text never does."""
    return BATCHED if event.WhichOneof("event") in BOOKKEEPING else how_held(event)
