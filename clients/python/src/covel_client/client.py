"""An asyncio client of the scheduler's public API (covel.scheduler.v1), with the retry rules of the kernel's
docs/retries.md: a read is sent again while the service is UNAVAILABLE (up to 3 more times, 0.1 s to 1 s apart); a
turn (SubmitActions) is sent again, with the same idempotency key, while the error says a retry may pass (RetryInfo:
the session busy, the queue full, a passing failure; or UNAVAILABLE), within `retry_for_s`. Any other failure is a
CovelError with the server's details decoded."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import grpc

from covel_client.errors import CovelError
from covel_client.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc

T = TypeVar("T")
READ_RETRIES = 3
TURN_RETRIED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED, grpc.StatusCode.RESOURCE_EXHAUSTED)


class Client:
    """`async with Client("127.0.0.1:50150") as covel:`; `token` for a stack that asks for one (COVEL_API_TOKEN or a
    player's OIDC token), `ca_file` for a scheduler that serves TLS."""

    def __init__(self, addr: str, *, token: str | None = None, ca_file: str | Path | None = None, server_name: str | None = None,
                 retry_for_s: float = 30.0) -> None:
        self.addr, self.retry_for_s = addr, retry_for_s
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        if ca_file is not None:
            options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
            credentials = grpc.ssl_channel_credentials(Path(ca_file).read_bytes())
            self._channel = grpc.aio.secure_channel(addr, credentials, options=options)
        else:
            self._channel = grpc.aio.insecure_channel(addr)
        self.stub = scheduler_pb2_grpc.SchedulerStub(self._channel)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _read(self, call: Callable[[], Awaitable[T]]) -> T:
        for attempt in range(READ_RETRIES + 1):
            try:
                return await call()
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or attempt == READ_RETRIES:
                    raise CovelError.of(error) from None
                await asyncio.sleep(min(1.0, 0.1 * 2 ** attempt))
        raise AssertionError("unreachable")

    async def create_session(self, request: scheduler_pb2.CreateSessionRequest | None = None) -> resources_pb2.Session:
        """A new session (sent once: a repeat would make a second one)."""
        try:
            reply = await self.stub.CreateSession(request or scheduler_pb2.CreateSessionRequest(), metadata=self._metadata)
        except grpc.aio.AioRpcError as error:
            raise CovelError.of(error) from None
        return reply.session

    async def get_session(self, session_id: str) -> resources_pb2.Session:
        request = scheduler_pb2.GetSessionRequest(session_id=session_id)
        return (await self._read(lambda: self.stub.GetSession(request, metadata=self._metadata))).session

    async def turns(self, session_id: str, page_size: int = 50) -> AsyncIterator[resources_pb2.Turn]:
        """The session's recorded turns, oldest first, a page at a time."""
        token = ""
        while True:
            request = scheduler_pb2.ListTurnsRequest(session_id=session_id, page_size=page_size, page_token=token)

            def list_page(request: scheduler_pb2.ListTurnsRequest = request) -> Awaitable[scheduler_pb2.ListTurnsResponse]:
                return self.stub.ListTurns(request, metadata=self._metadata)

            page = await self._read(list_page)
            for turn in page.turns:
                yield turn
            token = page.next_page_token
            if not token:
                return

    async def submit(self, session_id: str, text: str, *, kind: str = "act",
                     idempotency_key: str | None = None) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        """The events of one turn, as they come (the stream sends those ready together as one batch: they are given
        one by one, never a batch). Sent again with the same idempotency key while a retry may pass and no event came
        yet; a failure after the first event is raised (the turn's record then says what happened)."""
        request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, idempotency_key=idempotency_key or uuid.uuid4().hex,
                                                     actions=[resources_pb2.PlayerAction(kind=kind, text=text)], batch_events=True)
        give_up = time.monotonic() + self.retry_for_s
        while True:
            started = False
            try:
                async for message in self.stub.SubmitActions(request, metadata=self._metadata):
                    started = True
                    for event in events_of(message):
                        yield event
                return
            except grpc.aio.AioRpcError as error:
                failed = CovelError.of(error)
                wait_s = failed.retry_after_s if failed.retry_after_s is not None else 1.0
                retried = failed.code in TURN_RETRIED and (failed.retry_after_s is not None or failed.code == grpc.StatusCode.UNAVAILABLE)
                if started or not retried or time.monotonic() + wait_s > give_up:
                    raise failed from None
                await asyncio.sleep(wait_s)

    async def play(self, session_id: str, text: str, *, kind: str = "act") -> resources_pb2.Turn:
        """One turn played to its end: its record (status, story, trace)."""
        completed = None
        async for event in self.submit(session_id, text, kind=kind):
            if event.WhichOneof("event") == "turn_completed":
                completed = event.turn_completed
        if completed is None:
            raise CovelError(grpc.StatusCode.UNKNOWN, "the turn's stream ended without its record")
        return completed


def events_of(message: scheduler_pb2.TurnEvent) -> Sequence[scheduler_pb2.TurnEvent]:
    """The events one message of a turn stream carries: a batch's (a request's batch_events), or the message itself."""
    return message.batch.events if message.WhichOneof("event") == "batch" else (message,)
