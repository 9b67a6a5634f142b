"""The operator's plugin-data writes through the real services (issue 40): AdminPutPluginData and
AdminDeletePluginData override a record past the dataset's schema and operations, and nothing else: only an
operator may call them, the plugin must be active, `_` namespaces and the size limit hold, and each write is
logged with the operator who made it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import grpc
import pytest

from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.errors import error_info, field_violations
from shared.grpc_client import open_channel
from shared.structs import from_value, to_value
from tests.e2e.conftest import minimal_session

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "effects-probe"
# The probe's `notes` dataset: {text (required), topic}, no other field, ops [set].
OFF_SCHEMA = {"topic": "lore", "scribbled": True}


async def new_session(services) -> str:
    async with open_channel(services.addrs["scheduler"]) as channel:
        created = await scheduler_pb2_grpc.SchedulerStub(channel).CreateSession(
            minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE])
        )
    return created.session.id


def put(session_id: str, **fields) -> store_pb2.AdminPutPluginDataRequest:
    base = {
        "session_id": session_id,
        "plugin_id": PROBE,
        "namespace": "notes",
        "key": "n1",
        "operator": "ops-alice",
        "reason": "repair a broken note",
    }
    value = fields.pop("value", OFF_SCHEMA)
    return store_pb2.AdminPutPluginDataRequest(**{**base, **fields}, value=to_value(value))


async def stored(services, session_id: str) -> list[store_pb2.PluginDataEntry]:
    async with services.channel_as("store", "scheduler") as channel:
        return list(
            (
                await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(
                    store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=PROBE)
                )
            ).entries
        )


def audit_lines(services, event: str) -> list[dict]:
    lines = (services.log_dir / "store.log").read_text(encoding="utf-8").splitlines()
    return [record for record in map(json.loads, lines) if record.get("event") == event]


async def test_an_operator_overrides_a_record_past_its_datasets_schema_and_it_is_audited(services) -> None:
    session_id = await new_session(services)
    async with services.channel_as("store", "operator") as channel:
        store = store_pb2_grpc.TransactionalStoreStub(channel)
        written = (await store.AdminPutPluginData(put(session_id))).entry
        assert (written.plugin_id, written.namespace, written.key, written.turn_id) == (PROBE, "notes", "n1", "")
        assert from_value(written.value) == OFF_SCHEMA, "neither the schema (text missing, an extra field) nor ops apply"
        assert [(e.namespace, e.key, from_value(e.value)) for e in await stored(services, session_id)] == [
            ("notes", "n1", OFF_SCHEMA)
        ]
        replaced = (await store.AdminPutPluginData(put(session_id, value=None))).entry
        assert from_value(replaced.value) is None
        removed = (
            await store.AdminDeletePluginData(
                store_pb2.AdminDeletePluginDataRequest(
                    session_id=session_id, plugin_id=PROBE, namespace="notes", key="n1", operator="ops-bob"
                )
            )
        ).entry
        assert removed.key == "n1"
        assert not await stored(services, session_id)
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await store.AdminDeletePluginData(
                store_pb2.AdminDeletePluginDataRequest(
                    session_id=session_id, plugin_id=PROBE, namespace="notes", key="n1", operator="ops-bob"
                )
            )
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_info(missing.value).reason == "PLUGIN_DATA_NOT_FOUND"
    [put_line, _] = [line for line in audit_lines(services, "plugin_data.admin_put") if line["session_id"] == session_id]
    assert (put_line["operator"], put_line["caller"], put_line["namespace"], put_line["key"], put_line["reason"]) == (
        "ops-alice",
        "operator",
        "notes",
        "n1",
        "repair a broken note",
    )
    [deleted_line] = [line for line in audit_lines(services, "plugin_data.admin_delete") if line["session_id"] == session_id]
    assert deleted_line["operator"] == "ops-bob" and deleted_line["plugin_id"] == PROBE


async def test_auth_the_kernels_namespaces_the_size_limit_and_the_plugins_state_still_hold(services) -> None:
    session_id = await new_session(services)
    for identity in ("scheduler", "hooks"):
        async with services.channel_as("store", identity) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await store_pb2_grpc.TransactionalStoreStub(channel).AdminPutPluginData(put(session_id))
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED, identity
    async with services.channel_as("store", "operator") as channel:
        store = store_pb2_grpc.TransactionalStoreStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as reserved:
            await store.AdminPutPluginData(put(session_id, namespace="_hidden.notes", operator="", value="x" * 300_000))
        assert reserved.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        problems = {v.field: v.description for v in field_violations(reserved.value)}
        assert set(problems) == {"namespace", "operator", "value"}
        assert "reserved" in problems["namespace"] and "bytes" in problems["value"]
        with pytest.raises(grpc.aio.AioRpcError) as inactive:
            await store.AdminPutPluginData(put(session_id, plugin_id="dice-check"))
        assert inactive.value.code() == grpc.StatusCode.NOT_FOUND
        assert error_info(inactive.value).reason == "PLUGIN_NOT_ACTIVE"
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await store.AdminPutPluginData(put("no-such-session"))
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        async with open_channel(services.addrs["scheduler"]) as scheduler:
            await scheduler_pb2_grpc.SchedulerStub(scheduler).EndSession(scheduler_pb2.EndSessionRequest(session_id=session_id))
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await store.AdminPutPluginData(put(session_id))
        assert error_info(ended.value).reason == "SESSION_ENDED"
    assert not await stored(services, session_id)


async def covel(services, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "covel_cli.main", "operator", "plugin-data", *args],
        capture_output=True,
        text=True,
        env=services.env(),
        timeout=60,
    )


async def test_the_operators_command_writes_and_deletes_and_says_why_it_was_refused(services) -> None:
    session_id = await new_session(services)
    written = await covel(services, "put", session_id, PROBE, "notes", "cli", '{"topic": "people"}', "--operator", "ops-carol")
    assert written.returncode == 0 and f'{PROBE} notes/cli = {{"topic": "people"}}' in written.stdout, written.stderr
    assert [(e.key, from_value(e.value)) for e in await stored(services, session_id)] == [("cli", {"topic": "people"})]
    assert [line["operator"] for line in audit_lines(services, "plugin_data.admin_put") if line["session_id"] == session_id] == [
        "ops-carol"
    ]
    deleted = await covel(services, "delete", session_id, PROBE, "notes", "cli")
    assert deleted.returncode == 0 and "deleted" in deleted.stdout, deleted.stderr
    again = await covel(services, "delete", session_id, PROBE, "notes", "cli")
    assert again.returncode == 1 and "NOT_FOUND" in again.stderr
    not_json = await covel(services, "put", session_id, PROBE, "notes", "cli", "{broken")
    assert not_json.returncode == 2 and "not JSON" in not_json.stderr
