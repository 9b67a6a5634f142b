"""The group commit of hook state writes (services/store/hook_state_writes.py): the first write goes at once, the
writes that arrive while it runs go together in the next transaction, each answered with its own result or error.
The store's own answers, on SQLite and PostgreSQL, are in test_hook_state.py."""

from __future__ import annotations

import asyncio

import grpc

from covel.store.v1 import store_pb2
from services.store.hook_state_writes import HookStateWrites, access_each
from shared.errors import ServiceError


class CountingDatabase:
    """Database.write as the batches see it: how many writes each transaction carried."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    async def write(self, work, requests):
        assert work is access_each
        self.batches.append([request.key for request in requests])
        await asyncio.sleep(0.05)  # the transaction takes a while: writes gather meanwhile
        return [ServiceError(grpc.StatusCode.FAILED_PRECONDITION, "refused") if request.key == "bad"
                else store_pb2.AccessHookStateResponse(found=True) for request in requests]


async def test_writes_gather_while_one_runs_and_each_gets_its_own_answer() -> None:
    database = CountingDatabase()
    writes = HookStateWrites(database)  # type: ignore[arg-type]

    def write(key: str):
        return writes.write(store_pb2.AccessHookStateRequest(session_id="s", plugin_id="p", op="set", key=key))

    first = asyncio.ensure_future(write("a"))
    await asyncio.sleep(0.01)  # the first transaction runs
    later = [asyncio.ensure_future(write(key)) for key in ("b", "bad", "c")]
    answers = await asyncio.gather(first, *later, return_exceptions=True)
    assert database.batches == [["a"], ["b", "bad", "c"]], "one transaction for the writes that arrived meanwhile"
    assert [type(answer).__name__ for answer in answers] == ["AccessHookStateResponse", "AccessHookStateResponse", "ServiceError",
                                                             "AccessHookStateResponse"]
    await write("d")
    assert database.batches[-1] == ["d"], "an idle store writes at once"
