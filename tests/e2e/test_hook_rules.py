"""Each event's replace/abort rules, applied by a real plugin's hooks in real turns."""

from __future__ import annotations

import json

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from shared.structs import to_struct
from tests.e2e.conftest import minimal_session

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "rules-probe"


async def play(services, settings: dict, text: str = "I open the gate.") -> tuple[store_pb2.Turn, list, list]:
    """One turn in a new session whose rules-probe settings are `settings`: (turn, events, messages)."""
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (
            await stub.CreateSession(
                minimal_session(
                    requested_plugins=[PROBE], approved_plugins=[PROBE], plugin_settings={PROBE: to_struct(settings)}
                )
            )
        ).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text=text)])
        events = [event async for event in stub.SubmitActions(request)]
        messages = list((await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages)
    return events[-1].turn_completed, events, messages


def hook_entries(events, event_name: str):
    return [e.hook for e in events if e.WhichOneof("event") == "hook" and e.hook.event == event_name]


def streamed_after_last_reset(events) -> str:
    text = ""
    for event in events:
        if event.WhichOneof("event") == "narrative_delta":
            text = "" if event.narrative_delta.reset else text + event.narrative_delta.text
    return text


async def test_pre_schedule_empty_list_schedules_nothing(services) -> None:
    turn, _, messages = await play(services, {"preSchedule": "empty"})
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED
    assert list(turn.runtime_results) == []
    assert [m.role for m in messages] == [resources_pb2.MESSAGE_ROLE_PLAYER]


@pytest.mark.parametrize("mode", ["add", "abort", "mutate"])
async def test_pre_schedule_cannot_add_and_abort_or_mutation_changes_nothing(services, mode) -> None:
    turn, _, _ = await play(services, {"preSchedule": mode})
    assert [r.runtime_id for r in turn.runtime_results] == ["narrator"]
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED


async def test_pre_runtime_abort_skips_the_runtime_with_the_reason(services) -> None:
    turn, events, messages = await play(services, {"preRuntime": "abort"})
    [result] = turn.runtime_results
    assert (result.status, result.reason) == (resources_pb2.RUNTIME_STATUS_SKIPPED, "rules-probe skips narrator")
    finished = [e.runtime_finished for e in events if e.WhichOneof("event") == "runtime_finished"]
    assert finished[0].status == resources_pb2.RUNTIME_STATUS_SKIPPED
    assert turn.status == store_pb2.TURN_STATUS_FAILED and messages == []


async def test_post_context_assembly_keeps_the_framework_preamble(services) -> None:
    turn, events, _ = await play(services, {"systemPrompt": "Speak only in riddles.", "reportSystemPrompt": True})
    [report] = hook_entries(events, "PreLLMCall")
    seen = json.loads(report.message)
    assert seen["system"].startswith('You are the runtime "narrator" of the plugin "narrator"')
    assert seen["system"].endswith("Speak only in riddles.")
    assert "You are the narrator of an interactive story" not in seen["system"]


async def test_pre_llm_call_rewrites_one_call(services) -> None:
    turn, _, messages = await play(services, {"rewriteLastMessage": "I dance on the table."})
    assert "dance on the table" in turn.narrative
    assert messages[0].text == "I open the gate.", "the runtime's record and the log keep the real input"


async def test_pre_llm_call_model_replace_reaches_the_gateway(services) -> None:
    turn, _, _ = await play(services, {"model": "no-such-provider:model-x"})
    [result] = turn.runtime_results
    assert result.status == resources_pb2.RUNTIME_STATUS_FAILED and "no-such-provider" in result.reason


async def test_post_llm_response_correction_within_budget(services) -> None:
    turn, events, _ = await play(services, {"corrections": 2})
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED
    resets = [e for e in events if e.WhichOneof("event") == "narrative_delta" and e.narrative_delta.reset]
    assert len(resets) == 2
    assert streamed_after_last_reset(events) == turn.narrative


async def test_post_llm_response_correction_past_budget_fails_invalid_output(services) -> None:
    turn, _, messages = await play(services, {"corrections": 3})
    [result] = turn.runtime_results
    assert result.status == resources_pb2.RUNTIME_STATUS_FAILED and result.reason.startswith("invalid-output")
    assert turn.status == store_pb2.TURN_STATUS_FAILED and messages == []


async def test_post_llm_response_replaces_the_answer(services) -> None:
    story = {"segments": [{"kind": "narration", "text": "The gate swings open on its own."}], "yield": "user"}
    turn, _, _ = await play(services, {"response": story})
    assert turn.narrative == "The gate swings open on its own."


async def test_post_runtime_status_change_discards_the_writes(services) -> None:
    turn, _, messages = await play(services, {"postRuntime": "fail"})
    [result] = turn.runtime_results
    assert (result.status, result.reason) == (resources_pb2.RUNTIME_STATUS_FAILED, "rules-probe failed it")
    assert turn.status == store_pb2.TURN_STATUS_FAILED and messages == []


async def test_post_runtime_empty_story_fails(services) -> None:
    turn, _, _ = await play(services, {"postRuntime": "empty"})
    [result] = turn.runtime_results
    assert result.status == resources_pb2.RUNTIME_STATUS_FAILED and "no text" in result.reason


async def test_post_runtime_keeps_identity_and_revalidates_a_new_story(services) -> None:
    turn, _, messages = await play(services, {"postRuntime": "rename"})
    [result] = turn.runtime_results
    assert result.runtime_id == "narrator" and result.status == resources_pb2.RUNTIME_STATUS_SUCCESS
    assert turn.narrative == "Rewritten by a hook." and messages[1].text == "Rewritten by a hook."


async def test_pre_state_commit_veto_rejects_the_story_and_fails_the_turn(services) -> None:
    turn, _, messages = await play(services, {"preStateCommit": "veto"})
    assert turn.status == store_pb2.TURN_STATUS_FAILED and "rules-probe vetoes the story" in turn.abort_reason
    assert turn.abort_reason.startswith("story runtime narrator: proposal "), turn.abort_reason
    # The story's unit rolls the whole execution back: every other write is discarded with the reason.
    outcomes = list(turn.proposal_outcomes)
    rejected = [o for o in outcomes if o.status == store_pb2.PROPOSAL_STATUS_REJECTED]
    assert rejected and all(o.code == "hook-aborted" and o.reason.endswith("aborted it: rules-probe vetoes the story") for o in rejected)
    others = [o for o in outcomes if o not in rejected]
    assert all(o.status == store_pb2.PROPOSAL_STATUS_DISCARDED and o.code == "turn-rolled-back" for o in others), others
    assert turn.narrative == "" and messages == []


async def test_pre_state_commit_replaces_only_the_payload(services) -> None:
    turn, events, messages = await play(services, {"preStateCommit": "rewrite", "reportCommit": True})
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED
    assert messages[1].role == resources_pb2.MESSAGE_ROLE_STORY and messages[1].text == "A hook rewrote this story."
    assert turn.narrative == "A hook rewrote this story."
    [report] = [e for e in turn.hook_trace if e.event == "PostStateCommit"]
    assert report.message == "committed narrative.append of narrator"


async def test_a_faulty_plugin_is_paused_visible_and_can_be_reset(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (
            await stub.CreateSession(
                minimal_session(
                    requested_plugins=[PROBE], approved_plugins=[PROBE], plugin_settings={PROBE: to_struct({"raise": True})}
                )
            )
        ).session

        async def turn() -> list:
            request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I wait.")])
            events = [event async for event in stub.SubmitActions(request)]
            assert events[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED, "a non-guard fault only skips the handler"
            return [h.status for h in hook_entries(events, "PreLLMCall")]

        assert [await turn() for _ in range(3)] == [[resources_pb2.HOOK_STATUS_ERROR]] * 3
        paused = await stub.ListPausedPlugins(scheduler_pb2.ListPausedPluginsRequest(session_id=session.id))
        assert [p.plugin_id for p in paused.plugins] == [PROBE] and "rules-probe is broken on purpose" in paused.plugins[0].reason
        assert await turn() == [], "paused from the next execution on"
        reset = await stub.ResetPluginFaults(scheduler_pb2.ResetPluginFaultsRequest(session_id=session.id, plugin_id=PROBE))
        assert reset.was_paused
        assert await turn() == [resources_pb2.HOOK_STATUS_ERROR]


@pytest.mark.parametrize("reason", ["ended", "deleted"])
async def test_session_start_and_end_hooks_and_what_ending_means(services, tmp_path, reason) -> None:
    import grpc

    marker = tmp_path / "sessions.log"
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(
            requested_plugins=[PROBE], approved_plugins=[PROBE], plugin_settings={PROBE: to_struct({"marker": str(marker)})}))).session
        ending = resources_pb2.SESSION_ENDING_ENDED if reason == "ended" else resources_pb2.SESSION_ENDING_DELETED
        ended = await stub.EndSession(scheduler_pb2.EndSessionRequest(session_id=session.id, reason=ending))
        lines = marker.read_text().splitlines()
        assert lines == [f"SessionStart:{session.id}::''", f"SessionEnd:{session.id}:{reason}:''"]
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="hello?")])
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            _ = [event async for event in stub.SubmitActions(request)]
        if reason == "ended":
            assert ended.session.status == store_pb2.SESSION_STATUS_ENDED
            assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            await stub.EndSession(scheduler_pb2.EndSessionRequest(session_id=session.id))
            assert len(marker.read_text().splitlines()) == 2, "ending twice runs SessionEnd once"
        else:
            assert raised.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_failing_session_hook_is_logged_and_the_session_goes_on(services) -> None:
    """Session events have no turn trace: a handler that raises is a hook.failed log line, never a failed RPC."""
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(
            requested_plugins=[PROBE], approved_plugins=[PROBE], plugin_settings={PROBE: to_struct({"raiseOnSessionEvents": True})}))).session
        ended = await stub.EndSession(scheduler_pb2.EndSessionRequest(session_id=session.id))
    assert ended.session.status == store_pb2.SESSION_STATUS_ENDED
    failures = [line for line in _json_lines(services.log_dir / "scheduler.log") if line.get("event") == "hook.failed"
                and "rules-probe fails" in line.get("message", "")]
    assert {(line["hook_event"], line["plugin_id"]) for line in failures} >= {("SessionStart", PROBE), ("SessionEnd", PROBE)}


def _json_lines(path) -> list[dict]:
    lines = []
    for text in path.read_text().splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue
    return lines


async def test_self_data_rows_reach_the_agents_prompt(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(
            requested_plugins=[PROBE, "data-probe"], approved_plugins=[PROBE, "data-probe"],
            plugin_settings={PROBE: to_struct({"reportSystemPrompt": True})}))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I read my notes.")])
        events = [event async for event in stub.SubmitActions(request)]
    [report] = [e for e in hook_entries(events, "PreLLMCall") if e.runtime_id == "data-probe/recall"]
    system = json.loads(report.message)["system"]
    assert "<notes>\n- a | 1\n- count | 2\n</notes>" in system, "this turn's upstream writes, as rows"


async def test_static_prompt_segments_reach_story_runtimes_in_place(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(
            requested_plugins=[PROBE, "segment-probe"], approved_plugins=[PROBE],
            plugin_settings={PROBE: to_struct({"reportMessages": True})}))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I climb.")])
        events = [event async for event in stub.SubmitActions(request)]
    [report] = [e for e in hook_entries(events, "PreLLMCall") if e.runtime_id == "narrator"]
    seen = json.loads(report.message)
    assert "House rule: the moon is always full." in seen["messages"][0]["content"]
    assert [m["content"] for m in seen["messages"][1:]] == [
        "Earlier chapters are summarised elsewhere.", "Remember the lighthouse.", "Depth note.", "I climb."]
    assert {"pluginId": "segment-probe", "id": "rules"} in seen["promptSegments"]
