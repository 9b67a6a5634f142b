"""load_state across hooks replicas (services/hooks/plugin_side/turn_share.py): TurnStart served by replica A, the turn's
later events and its message:sent by replica B, one real store between them; B's hooks see A's loaded state."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio

from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.hooks.plugin_side.turn_share import KEY
from services.hooks.server import start as start_hooks
from services.hooks.settings import HooksSettings
from services.registry.server import start as start_registry
from services.registry.settings import RegistrySettings
from services.store.server import start as start_store
from services.store.settings import StoreSettings
from shared.structs import from_struct, to_struct
from tests.conftest import free_addr
from tests.support.identities import PolicyRoutedStub, bare_channel_as, service_tls

pytestmark = pytest.mark.asyncio(loop_scope="session")

MANIFEST = """---
version: 0.1.0
displayName: Remembers
description: load_state on one replica, the rest of the turn on another.
contributes:
  hooks: [TurnStart, PostContextAssembly]
---
"""
CODE = '''
import json
from shared.plugin_sdk.hookspecs import hookimpl

SAVED = {saved!r}


class Remembers:
    @hookimpl
    def load_state(self, message, session_id):
        if message["content"] == "opaque":
            return {{"mood": "hidden", "handle": object()}}
        return {{"mood": "calm", "heard": message["content"]}}

    @hookimpl
    def system_prompt(self, prompt, state):
        return "mood=" + str(state.get("mood"))

    @hookimpl
    def save_state(self, session_id, state, message, model_output):
        with open(SAVED, "a", encoding="utf-8") as out:
            out.write(json.dumps({{"mood": state.get("mood"), "turn_id": state["turn_id"], "message": message["content"],
                                  "story": model_output}}) + "\\n")


def register(covel):
    covel.register_hookimpls(Remembers())
'''


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def replicas(tmp_path_factory):
    """Registry, store, and two hooks services on them (replicas A and B); their stubs as the scheduler."""
    plugins, out = tmp_path_factory.mktemp("plugins"), tmp_path_factory.mktemp("saved")
    out.chmod(0o777)  # a sandboxed plugin's worker writes here
    saved = out / "saved.jsonl"
    (plugins / "remembers" / "server").mkdir(parents=True)
    (plugins / "remembers" / "PLUGIN.md").write_text(MANIFEST)
    (plugins / "remembers" / "server" / "index.py").write_text(CODE.format(saved=str(saved)))
    registry_addr, store_addr = free_addr(), free_addr()
    registry = await start_registry(RegistrySettings(registry_addr=registry_addr, plugin_dirs=[plugins], **service_tls("registry")))
    store = await start_store(StoreSettings(data_dir=tmp_path_factory.mktemp("store"), store_addr=store_addr, **service_tls("store")))
    servers, stubs = [], []
    for _ in range(2):
        addr = free_addr()
        servers.append(await start_hooks(HooksSettings(registry_addr=registry_addr, hooks_addr=addr, store_addr=store_addr,
                                                       **service_tls("hooks"))))
        stubs.append(PolicyRoutedStub(addr, hooks_pb2_grpc.HookDispatcherStub, "covel.hooks.v1.HookDispatcher", bare=False))
    # The store as the scheduler (sessions) and as the hooks service (hook state) call it.
    store_channels = [bare_channel_as(store_addr, "scheduler"), bare_channel_as(store_addr, "hooks")]
    yield stubs, [store_pb2_grpc.TransactionalStoreStub(channel) for channel in store_channels], saved
    for stub in stubs:
        await stub.close()
    for channel in store_channels:
        await channel.close()
    for server in servers:
        await server.stop(0)
    await store.stop(0)
    await registry.stop(0)


def context(session_id: str, turn_id: str, **runtime: str) -> hooks_pb2.HookContext:
    return hooks_pb2.HookContext(session_id=session_id, turn_id=turn_id, active_plugin_ids=["remembers"],
                                 approved_plugin_ids=["remembers"], **runtime)


async def assembled_on(stub, session_id: str, turn_id: str) -> str:
    reply = await stub.Dispatch(hooks_pb2.DispatchRequest(
        event="PostContextAssembly", context=context(session_id, turn_id, plugin_id="remembers", runtime_id="narrator"),
        payload=to_struct({"systemPrompt": "sys", "messages": [{"role": "user", "content": "hi"}]})))
    return str(from_struct(reply.payload)["systemPrompt"])


async def turn_start_on(stub, session_id: str, turn_id: str, said: str) -> None:
    reply = await stub.Dispatch(hooks_pb2.DispatchRequest(
        event="TurnStart", context=context(session_id, turn_id),
        payload=to_struct({"playerMessage": said, "actions": [], "activeRuntimes": []})))
    assert reply.outcome == hooks_pb2.OUTCOME_CONTINUE


async def message_sent_on(stub, session_id: str, story: str, turn_id: str) -> None:
    reply = await stub.EmitEvent(hooks_pb2.EmitEventRequest(
        key="message:sent", session=hooks_pb2.HookContext(session_id=session_id, active_plugin_ids=["remembers"],
                                                          approved_plugin_ids=["remembers"]),
        context=to_struct({"to": session_id, "content": story, "success": True, "turnId": turn_id})))
    assert reply.completed


async def new_session(store) -> str:
    return (await store.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session(locale="en")))).session.id


async def test_the_next_replica_sees_the_state_load_state_gave_on_another(replicas) -> None:
    (a, b), (store, hook_state), saved = replicas
    session_id = await new_session(store)
    await turn_start_on(a, session_id, "t1", "I knock.")
    assert await assembled_on(b, session_id, "t1") == "sys\n\nmood=calm"
    await message_sent_on(b, session_id, "The door opens.", "t1")
    [record] = [json.loads(line) for line in saved.read_text().splitlines() if json.loads(line)["turn_id"] == "t1"]
    assert record == {"mood": "calm", "turn_id": "t1", "message": "I knock.", "story": "The door opens."}
    # The next turn, begun on B, is the one A now finds (not t1's, which A never kept either).
    await turn_start_on(b, session_id, "t2", "I wait.")
    assert await assembled_on(a, session_id, "t2") == "sys\n\nmood=calm"
    shared = await hook_state.AccessHookState(store_pb2.AccessHookStateRequest(session_id=session_id, plugin_id="remembers", op="get", key=KEY))
    assert shared.found and from_struct(shared.value.struct_value)["message"]["content"] == "I wait."


async def test_a_state_that_is_not_json_stays_with_its_replica(replicas) -> None:
    (a, b), (store, _), _ = replicas
    session_id = await new_session(store)
    await turn_start_on(a, session_id, "t1", "opaque")
    assert await assembled_on(b, session_id, "t1") == "sys\n\nmood=None", "B knows nothing of it"


async def test_a_background_turn_that_starts_before_the_story_goes_out_takes_nothing_of_it(replicas) -> None:
    """A detached job's turn whose TurnStart comes between a player's turn's TurnStart and its message:sent: the story
    is saved with the player's turn's message and state, not the background turn's."""
    (a, _), (store, _), saved = replicas
    session_id = await new_session(store)
    await turn_start_on(a, session_id, "player", "I light the lamp.")
    await turn_start_on(a, session_id, "background", "")
    await message_sent_on(a, session_id, "The lamp flares.", "player")
    [record] = [json.loads(line) for line in saved.read_text().splitlines() if json.loads(line)["turn_id"] == "player"]
    assert record == {"mood": "calm", "turn_id": "player", "message": "I light the lamp.", "story": "The lamp flares."}
    assert await assembled_on(a, session_id, "background") == "sys\n\nmood=calm", "the background turn keeps its own state"
