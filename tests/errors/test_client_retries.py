"""`covel play` sends a submit again, with the same request, while the error says a retry may pass (docs/retries.md)."""

from __future__ import annotations

import io

import grpc
import pytest
from grpc.aio import Metadata

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel_cli.play import _stream_retried
from shared.errors import ServiceError, unavailable


def as_client_error(error: ServiceError) -> grpc.aio.AioRpcError:
    """The error as a client receives it: its status and the google.rpc details in the trailers."""
    status = error.to_status()
    return grpc.aio.AioRpcError(status.code, Metadata(), Metadata(*status.trailing_metadata), status.details)


class Flaky:
    """A SubmitActions that fails with `errors` in turn, then streams a committed turn; the requests it got."""

    def __init__(self, *errors: ServiceError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return self._events()

    async def _events(self):
        if self.errors:
            yield scheduler_pb2.TurnEvent(turn_started=scheduler_pb2.TurnStarted(turn_id="first"))
            raise as_client_error(self.errors.pop(0))
        yield scheduler_pb2.TurnEvent(turn_completed=resources_pb2.Turn(id="t", status=resources_pb2.TURN_STATUS_COMMITTED))


async def test_a_passing_failure_is_sent_again_and_the_turn_shown() -> None:
    submit = Flaky(unavailable("turn t failed for a passing reason", reason="TURN_FAILED_RETRYABLE", retry_after_ms=10),
                   ServiceError(grpc.StatusCode.ABORTED, "session busy", reason="SESSION_BUSY", retry_after_ms=10))
    out = io.StringIO()
    turn = await _stream_retried(submit, out)
    assert turn is not None and turn.id == "t" and submit.calls == 3
    assert "trying again in 0.01 s" in out.getvalue()


async def test_a_mistake_is_not_sent_again() -> None:
    submit = Flaky(ServiceError(grpc.StatusCode.INVALID_ARGUMENT, "actions: empty"))
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await _stream_retried(submit, io.StringIO())
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT and submit.calls == 1
    # ABORTED without RetryInfo (an idempotency key reused for another request) is a mistake too.
    submit = Flaky(ServiceError(grpc.StatusCode.ABORTED, "idempotency key reused"))
    with pytest.raises(grpc.aio.AioRpcError):
        await _stream_retried(submit, io.StringIO())
    assert submit.calls == 1
