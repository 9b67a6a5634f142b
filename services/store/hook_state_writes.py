"""Hook state writes that arrive together share one write transaction (a group commit).

A turn's watchers reach the hooks service in one DispatchObserved call, and cost-gate's counts them with one
`ctx.state.add` each: seven writes at once, each its own write transaction (SQLite's one writer takes them one
after another). Here a write that arrives while the store writes hook state waits for that transaction to end, and
the writes that gathered meanwhile go in the next one together, each in its own savepoint: each is answered with its
own result or its own error, as alone (a key over the limit fails that write only), in the order they arrived. A
write that finds the store idle goes at once. What a batch commits is what its writes one after another would have.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from covel.store.v1 import store_pb2
from services.store import hook_state
from services.store.database import Database
from shared.errors import ServiceError


@dataclass
class _Waiting:
    request: store_pb2.AccessHookStateRequest
    answer: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


def access_each(db: Session, requests: list[store_pb2.AccessHookStateRequest]) -> list[store_pb2.AccessHookStateResponse | ServiceError]:
    """Each request in its own savepoint of one transaction: its answer, or the error that rolled it alone back."""
    answers: list[store_pb2.AccessHookStateResponse | ServiceError] = []
    for request in requests:
        try:
            with db.begin_nested():
                answers.append(hook_state.access(db, request))
        except ServiceError as error:
            answers.append(error)
    return answers


class HookStateWrites:
    def __init__(self, database: Database) -> None:
        self._db = database
        self._gathered: list[_Waiting] = []
        self._writing: asyncio.Task | None = None

    async def write(self, request: store_pb2.AccessHookStateRequest) -> store_pb2.AccessHookStateResponse:
        waiting = _Waiting(request)
        self._gathered.append(waiting)
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write_gathered())
        return await waiting.answer  # a caller that stops waiting cancels its answer; its write may still be made

    async def _write_gathered(self) -> None:
        while self._gathered:
            batch, self._gathered = self._gathered, []
            try:
                answers = await self._db.write(access_each, [waiting.request for waiting in batch])
            except Exception as error:  # the transaction failed (the database, not one write): each write fails with it
                for waiting in batch:
                    if not waiting.answer.done():
                        waiting.answer.set_exception(error)
                continue
            for waiting, answer in zip(batch, answers, strict=True):
                if waiting.answer.done():
                    continue
                if isinstance(answer, ServiceError):
                    waiting.answer.set_exception(answer)
                else:
                    waiting.answer.set_result(answer)
