"""The builtin delegate tool through the real services (subagent results, error codes, depth 1),
and concealed agents: a concealed runtime's and a concealed provider's content never reaches a
client, while hooks still receive it and the store keeps it."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value, to_struct
from tests.e2e.conftest import minimal_session, restart_gateway, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "delegate-probe"
DELEGATOR, HELPER, SCHEMER, WHISPERER = (f"{PROBE}/delegator", f"{PROBE}/helper", f"{PROBE}/schemer", f"{PROBE}/whisperer")


def delegate(runtime_id: str, brief: str) -> dict:
    return {"tool_calls": [{"name": "delegate", "arguments": {"target": {"runtimeId": runtime_id}, "brief": brief}}]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def delegating_services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("delegation"), script={}) as group:
        yield group


async def scripted(services, **queues: list) -> None:
    """This test's replies, one queue per slot (each runtime answers on its own slot): the gateway
    restarts with them, so a test never reads replies another test left or took."""
    await restart_gateway(services, {"queues": queues})


async def play(services, settings: dict, plugins: tuple[str, ...] = (PROBE,), session_out: list | None = None):
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(
            requested_plugins=list(plugins), approved_plugins=list(plugins), plugin_settings={PROBE: to_struct(settings)}))).session
        if session_out is not None:
            session_out.append(session)
        events = [event async for event in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I look for the key.")]))]
        turn = events[-1].turn_completed
        shown = (await stub.GetTurn(scheduler_pb2.GetTurnRequest(session_id=session.id, turn_id=turn.id))).turn
    async with services.channel_as("store", "scheduler") as channel:
        stored = (await store_pb2_grpc.TransactionalStoreStub(channel).GetTurn(
            store_pb2.GetTurnRequest(session_id=session.id, turn_id=turn.id))).turn
    return events, shown, stored


def tool_reports(turn, runtime_id: str) -> list[dict]:
    """What the probe's PostToolUse hook saw of each call of `runtime_id` (its abort reason)."""
    return [json.loads(e.message) for e in turn.hook_trace
            if e.event == "PostToolUse" and e.handler_plugin_id == PROBE and e.runtime_id == runtime_id and e.message]


async def test_delegate_hands_back_the_subagents_output_and_a_subagent_cannot_delegate(delegating_services) -> None:
    await scripted(delegating_services,
                   delegator=[delegate(HELPER, "Where is the key?"), {"text": "The helper found it."}],
                   helper=[delegate(HELPER, "Go deeper."), {"text": "Under the mat."}])
    _, turn, _ = await play(delegating_services, {"run": "delegator"})
    result = next(r for r in turn.runtime_results if r.runtime_id == DELEGATOR)
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    [handed_back] = tool_reports(turn, DELEGATOR)
    assert handed_back["result"] == {"ok": True, "data": {"output": {"content": "Under the mat."}, "stopReason": "completed"}}
    # Depth 1: the helper was offered no delegate, so its call of it was unauthorized.
    [nested] = tool_reports(turn, HELPER)
    assert nested["name"] == "delegate" and nested["result"]["error"]["code"] == "unauthorized"
    helper_entries = [e for e in turn.hook_trace if e.runtime_id == HELPER]
    assert helper_entries and all(e.subagent_call_id and e.parent_runtime_id == DELEGATOR for e in helper_entries)
    assert [e.event for e in turn.hook_trace if e.event.startswith("subagent.")] == ["subagent.started", "subagent.completed"]


async def test_a_cancelled_and_an_invalid_subagent_answer_cancelled_and_internal(delegating_services) -> None:
    await scripted(delegating_services,
                   delegator=[delegate(HELPER, "Anything?"), delegate(f"{PROBE}/strict", "Answer strictly."), {"text": "Both failed."}],
                   strict=[{"text": "not json"}, {"text": "still not json"}])
    _, turn, _ = await play(delegating_services, {"run": "delegator", "helper": "cancel"})
    result = next(r for r in turn.runtime_results if r.runtime_id == DELEGATOR)
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    cancelled, invalid = tool_reports(turn, DELEGATOR)
    assert cancelled["result"]["ok"] is False and cancelled["result"]["error"]["code"] == "cancelled"
    assert cancelled["result"]["stopReason"] == "cancelled"
    # Invalid output after its one repair: internal, with the fixed text (the real reason is in the server log).
    assert invalid["result"]["error"] == {"code": "internal", "message": "the subagent did not produce a valid answer"}
    assert invalid["result"]["stopReason"] == "invalid-output"
    marks = [(e.event, e.status) for e in turn.hook_trace if e.event.startswith("subagent.")]
    assert marks == [("subagent.started", resources_pb2.HOOK_STATUS_OK), ("subagent.failed", resources_pb2.HOOK_STATUS_ERROR)] * 2


def _client_text(events, shown) -> str:
    return "\n".join(str(event) for event in events) + str(shown)


async def test_a_concealed_agent_runtimes_content_reaches_no_client(delegating_services) -> None:
    await scripted(delegating_services, schemer=[
        {"tool_calls": [{"name": "plant-clue", "arguments": {"clue": "SECRET-CLUE-ARG"}}]}, {"text": "SECRET-SCHEMER-REPLY"}])
    events, shown, stored = await play(delegating_services, {"run": "schemer"})
    result = next(r for r in shown.runtime_results if r.runtime_id == SCHEMER)
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS and result.concealed and not result.HasField("output")
    # Prompt, reply, tool arguments and results: in no streamed event and not in GetTurn.
    assert "SECRET" not in _client_text(events, shown)
    assert any(e.runtime_id == SCHEMER and e.event == "PostToolUse" for e in shown.hook_trace), "the entries stay, emptied"
    # ... keeping the tool's name, status and time (issue 40, 11).
    tool_entries = [e for e in shown.hook_trace if e.runtime_id == SCHEMER and e.event in ("PreToolUse", "PostToolUse")]
    assert {e.tool_name for e in tool_entries} == {"plant-clue"} and all(e.status and not e.message for e in tool_entries)
    # The hooks received them all the same; the stored turn keeps them (for retries).
    [planted] = tool_reports(stored, SCHEMER)
    assert planted["arguments"] == {"clue": "SECRET-CLUE-ARG"} and planted["result"]["data"] == {"planted": "SECRET-CLUE-ARG"}
    prompts = [json.loads(e.message)["prompt"] for e in stored.hook_trace if e.event == "PreLLMCall" and e.runtime_id == SCHEMER]
    assert len(prompts) == 2 and all(p.endswith("SECRET-SCHEMER-PROMPT") for p in prompts)
    assert "SECRET-SCHEMER-REPLY" in str(stored.runtime_results)


async def test_a_concealed_providers_trace_is_hidden_from_clients(delegating_services) -> None:
    await scripted(delegating_services,
                   delegator=[delegate(WHISPERER, "Tell me the secret."), {"text": "I was told something."}],
                   whisperer=[{"tool_calls": [{"name": "peek", "arguments": {}}]}, {"text": "SECRET-WHISPER-REPLY"}])
    events, shown, stored = await play(delegating_services, {"run": "delegator"})
    result = next(r for r in shown.runtime_results if r.runtime_id == DELEGATOR)
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    whispered = [e for e in shown.hook_trace if e.runtime_id == WHISPERER]
    assert whispered and all(not e.message for e in whispered)
    client = _client_text(events, shown)
    assert "SECRET-WHISPER-PROMPT" not in client and "a secret door" not in client
    # The store keeps the provider's entries in full.
    assert tool_reports(stored, WHISPERER)[0]["result"]["data"] == {"behind": "a secret door"}


async def test_a_nested_run_shares_the_root_executions_subagent_budget(delegating_services) -> None:
    await scripted(delegating_services,
                   helper=[{"text": "First answer."}], delegator=[delegate(HELPER, "Second."), {"text": "No more calls."}])
    # maxSubagentCalls 1 (a session setting): the root function's own call uses it up, so the
    # delegator it runs nested (ctx.recursive_call) finds none left.
    _, turn, _ = await play(delegating_services, {"run": "rooted", "maxSubagentCalls": 1})
    rooted = next(r for r in turn.runtime_results if r.runtime_id == f"{PROBE}/rooted")
    assert rooted.status == resources_pb2.RUNTIME_STATUS_SUCCESS, rooted.reason
    output = from_struct(rooted.output)
    assert output["first"]["ok"] is True and output["first"]["output"] == {"content": "First answer."}
    assert output["nested"] == "success"
    [refused] = tool_reports(turn, DELEGATOR)
    assert refused["result"]["error"]["code"] == "unavailable" and "maxSubagentCalls" in refused["result"]["error"]["message"]


async def test_a_subagent_keeps_an_imported_write_service_and_its_write_commits_with_the_caller(delegating_services) -> None:
    await scripted(delegating_services,
                   delegator=[delegate(f"{PROBE}/scribe", "Record the key."), {"text": "Recorded."}],
                   scribe=[{"tool_calls": [{"name": "write-ledger", "arguments": {"entry": "from-subagent"}}]}, {"text": "Done."}])
    sessions: list = []
    _, turn, _ = await play(delegating_services, {"run": "delegator"}, plugins=(PROBE, "service-probe"), session_out=sessions)
    result = next(r for r in turn.runtime_results if r.runtime_id == DELEGATOR)
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    [recorded] = tool_reports(turn, f"{PROBE}/scribe")
    assert recorded["name"] == "write-ledger" and recorded["result"] == {"ok": True, "data": {"recorded": "from-subagent"}}
    async with delegating_services.channel_as("store", "scheduler") as channel:
        entries = (await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(store_pb2.ListPluginDataRequest(
            session_id=sessions[0].id, plugin_id="service-probe", namespace="ledger"))).entries
    # The staged operation belongs to the service's plugin, called as the subagent, committed with the delegator.
    assert {e.key: from_value(e.value) for e in entries} == {"from-subagent": {"by": f"{PROBE}/scribe", "committedAs": "service-probe service:probe.ledger@1"}}
