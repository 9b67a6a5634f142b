"""A retried request (same idempotency key) must be the same request.

The store answers a known key with the turn it already recorded; that answer is only right when
the retry asks for what the first request asked for. A key reused for other actions is the
caller's mistake, and silently replaying the old turn would hide it.
"""

from __future__ import annotations

from covel.store.v1 import store_pb2
from services.scheduler.execution.origins import TurnOrigin
from services.scheduler.turn.request import ManualRun, TurnRequest
from shared.errors import ServiceError, failed_precondition


def retry_mismatch(recorded: store_pb2.Turn, request: TurnRequest) -> str:
    """What differs between the recorded turn and the request that reuses its key ("" when nothing)."""
    recorded_origin = recorded.origin or TurnOrigin.PLAYER
    if recorded_origin != (request.origin or TurnOrigin.PLAYER):
        return f"it was a {recorded_origin} turn, this is a {request.origin or TurnOrigin.PLAYER} request"
    if list(recorded.actions) != list(request.actions):
        return "its actions differ from this request's"
    manual = request.work.runtime_id if isinstance(request.work, ManualRun) else ""
    if manual and all(r.runtime_id != manual for r in recorded.runtime_results):
        return f"it did not run runtime {manual!r}"
    return ""


def check_retry(recorded: store_pb2.Turn, request: TurnRequest) -> None:
    """FAILED_PRECONDITION when `request` reuses `recorded`'s idempotency key for something else."""
    mismatch = retry_mismatch(recorded, request)
    if mismatch:
        raise _reused_key(recorded, mismatch)


def _reused_key(recorded: store_pb2.Turn, mismatch: str) -> ServiceError:
    return failed_precondition(
        f"idempotency_key was already used by turn {recorded.id} and {mismatch}; "
        "send the same request to retry it, or use a new key for a new request",
        reason="IDEMPOTENCY_KEY_REUSED", subject=f"turns/{recorded.id}",
    )
