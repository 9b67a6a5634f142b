"""Data ownership of the builtin plugins, through the real scheduler and store.

A plugin's data is addressed by (plugin, namespace, key): the scheduler gives a runtime's
ctx.plugin_data only its own plugin's committed records and its own plugin's buffered upstream
writes, and every write it proposes is committed under its own plugin id (the store attributes
each proposal to proposal.plugin_id and applies a dataset's schema and operations to the
declaring plugin's namespace only). The fixture plugin `trespasser` (tests/fixtures/ownership)
reads and writes `items`, `scores`, `memories`, `checks`, `tally` and `clock` by name, after
world-time/advance has buffered its clock write in the same turn: it sees none of the builtin
plugins' records, and what it writes lands in its own namespace, leaving theirs untouched.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid

import jsonschema
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.play import DEFAULT_WORLD
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value
from tests.e2e.conftest import running_services
from tests.support.builtin_plugins import SETUP_PLUGINS

OWNERSHIP = REPO_ROOT / "tests" / "fixtures" / "ownership"
PLUGINS = REPO_ROOT / "plugins"
OWNED = {  # plugin -> {namespace: schema}
    "inventory": {"items": "inventory/schemas/item.schema.json"},
    "affinity": {"scores": "affinity/schemas/score.schema.json"},
    "memory": {"memories": "memory/schemas/memory.schema.json"},
    "dice-check": {"checks": "dice-check/schemas/check-record.schema.json", "tally": "dice-check/schemas/tally.schema.json"},
    "world-time": {"clock": "world-time/schemas/clock.schema.json"},
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("covel-ownership"), plugin_dirs=(OWNERSHIP,)) as group:
        yield group


async def data(store, session_id: str, plugin_id: str, namespace: str = "") -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=plugin_id, namespace=namespace))
    return {(entry.namespace, entry.key): from_value(entry.value) for entry in reply.entries}


async def play(stub, session_id: str, text: str) -> store_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


@pytest.mark.asyncio(loop_scope="session")
async def test_a_plugin_neither_sees_nor_overwrites_the_builtin_plugins_data(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        request = scheduler_pb2.CreateSessionRequest(requested_plugins=["trespasser"], approved_plugins=["trespasser"], world_id=DEFAULT_WORLD,
                                                     excluded_plugins=SETUP_PLUGINS)
        session_id = (await stub.CreateSession(request)).session.id

        first = await play(stub, session_id, "I pick up the rusty key and thank Old Tobin.")
        assert first.status == store_pb2.TURN_STATUS_COMMITTED, first.abort_reason
        reach = {r.runtime_id: r for r in first.runtime_results}["trespasser/reach"]
        assert reach.status == resources_pb2.RUNTIME_STATUS_SUCCESS, reach.reason
        # Nothing of the others: not the committed inventory (stocked before), not world-time's buffered clock.
        assert from_struct(reach.output) == {"seen": {ns: None for ns in ("items", "scores", "memories", "checks", "tally", "clock")},
                                             "listed": []}

        second = await play(stub, session_id, "I climb onto the roof of the inn.")
        assert second.status == store_pb2.TURN_STATUS_COMMITTED, second.abort_reason
        reach = from_struct({r.runtime_id: r for r in second.runtime_results}["trespasser/reach"].output)
        # It reads back only what it wrote itself last turn, under its own plugin id.
        assert all(value["forged"] is True for value in reach["seen"].values()), reach["seen"]
        assert reach["listed"] == ["checks/t1-1", "clock/now", "items/brass-lantern", "memories/rusty-key", "scores/tobin", "tally/all"]

        for _ in range(300):  # the detached memory extractions of both turns
            if len(await data(store, session_id, "memory", "memories")) >= 2:
                break
            await asyncio.sleep(0.1)
        for plugin_id, namespaces in OWNED.items():
            for namespace, path in namespaces.items():
                records = await data(store, session_id, plugin_id, namespace)
                assert records, (plugin_id, namespace)
                for value in records.values():
                    assert "forged" not in value, (plugin_id, namespace, value)
                    jsonschema.validate(value, json.loads((PLUGINS / path).read_text()))
        assert (await data(store, session_id, "inventory", "items"))[("items", "brass-lantern")]["quantity"] == 1
        assert (await data(store, session_id, "world-time", "clock"))[("clock", "now")]["minutes"] == 19 * 60 + 30 + 20 + 45
        assert (await data(store, session_id, "dice-check", "checks")).keys() == {("checks", "t2-1")}
        own = await data(store, session_id, "trespasser")
        assert len(own) == 6 and all(value["forged"] for value in own.values())


def test_an_agent_cannot_ask_for_the_dataset_tools_of_another_plugins_datasets() -> None:
    """The generated dataset tools come only from the runtime's own package's contributes.datasets:
    asking for `items` or `scores` from another package is a load error (the package does not load)."""
    poacher = REPO_ROOT / "tests" / "fixtures" / "invalid-plugins" / "poacher"
    done = subprocess.run([sys.executable, "-m", "covel_cli.main", "validate-plugin", str(poacher)], capture_output=True, text=True,
                          cwd=REPO_ROOT)
    assert done.returncode == 1, done.stdout
    assert "unknown-dataset `items` is not declared in contributes.datasets" in done.stdout
    assert "unknown-dataset `scores` is not declared in contributes.datasets" in done.stdout
