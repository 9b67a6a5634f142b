"""Peer outages a runtime met while it ran. A runtime that fails after one (the gateway or the hooks
service restarting, a peer past its deadline) failed for a passing reason: its turn is recorded
retryable, and a retry with the same idempotency key runs it again (docs/retries.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import grpc

from shared.errors import PASSING_CODES

# The outages of the runtime running in this task (and the tasks it started); None outside one.
_SEEN: ContextVar[list[str] | None] = ContextVar("covel_runtime_outages", default=None)


@contextlib.contextmanager
def watching() -> Iterator[list[str]]:
    """Collect the outages noted while the body runs (a runtime's run), e.g. ["gateway: UNAVAILABLE"]."""
    seen: list[str] = []
    token = _SEEN.set(seen)
    try:
        yield seen
    finally:
        _SEEN.reset(token)


def note(peer: str, error: grpc.aio.AioRpcError) -> None:
    """A peer call failed: remembered when the failure is passing and a runtime is being watched."""
    seen = _SEEN.get()
    if seen is not None and error.code() in PASSING_CODES:
        seen.append(f"{peer}: {error.code().name}")
