"""What TurnShared keeps for a turn's runtimes as they run: reads shared by a layer, buffered plugin data."""

from __future__ import annotations

import asyncio

import pytest

from covel.store.v1 import store_pb2
from services.scheduler.execution.turn_shared import TurnShared
from shared.plugin_data.execution_view import BufferedWrite
from shared.structs import to_struct


def _state(**fields) -> TurnShared:
    return TurnShared(**{"history": [], "packages": {}, **fields})


async def test_a_turns_shared_read_is_sent_once_for_callers_that_start_together() -> None:
    """A layer's runtimes all need the world: they share one GetWorld; a failed read is tried again;
    a caller cancelled does not cancel the read for the others."""
    run = _state()
    sent: list[str] = []
    release = asyncio.Event()

    async def read() -> str:
        sent.append("read")
        await release.wait()
        return "world"

    waiting = [asyncio.ensure_future(run.read_once("world", read)) for _ in range(5)]
    await asyncio.sleep(0)
    waiting[0].cancel()
    release.set()
    assert await asyncio.gather(*waiting[1:]) == ["world"] * 4 and sent == ["read"]
    assert await run.read_once("world", read) == "world" and sent == ["read"], "read once per turn"

    async def failing() -> str:
        sent.append("failed")
        raise ConnectionError("store down")

    with pytest.raises(ConnectionError):
        await run.read_once("exports", failing)
    assert await run.read_once("exports", read) == "world" and sent == ["read", "failed", "read"]


def _proposal(plugin_id: str, runtime_id: str, kind: str, payload: dict) -> store_pb2.Proposal:
    return store_pb2.Proposal(type=kind, plugin_id=plugin_id, runtime_id=runtime_id, payload=to_struct(payload))


def test_plugin_data_writes_are_the_plugins_own_in_order_as_proposals_come() -> None:
    """ctx.plugin_data's upstream: converted once per proposal (not once per reader: N² for N runtimes)."""
    run = _state()
    first = {"namespace": "ns", "key": "a", "value": 1}
    run.proposals += [_proposal("p", "p/one", "plugin.data", first), _proposal("q", "q/one", "plugin.data", first),
                      _proposal("p", "p/one", "event.emit", {"name": "x"})]
    assert run.plugin_data_writes("p") == [BufferedWrite("p/one", "plugin.data", first)]
    later = {"namespace": "ns", "key": "a"}
    run.proposals.append(_proposal("p", "p/two", "plugin.data.delete", later))
    writes = run.plugin_data_writes("p")
    assert writes == [BufferedWrite("p/one", "plugin.data", first), BufferedWrite("p/two", "plugin.data.delete", later)]
    writes.clear()
    assert len(run.plugin_data_writes("p")) == 2, "each reader gets a list of its own"
    assert run.plugin_data_writes("q") == [BufferedWrite("q/one", "plugin.data", first)] and run.plugin_data_writes("r") == []
