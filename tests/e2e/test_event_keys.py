"""Gateway event keys emitted by the real scheduler at their points, with their context fields,
received by family subscriptions of a real plugin (tests/fixtures/plugins/event-key-probe);
gateway:shutdown and gateway:pre-restart waits measured on real processes; and a hookspec
plugin (plugins/example-hookspecs) deciding a real turn."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import time
from pathlib import Path

import grpc
import pytest

from covel.hooks.v1 import hooks_pb2_grpc
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.hooks_info import info
from covel_cli.launcher import ServiceGroup, free_port_addrs
from services.scheduler.hooks.event_keys import SchedulerEventKeys
from shared.grpc_client import check_health, open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct, to_struct
from tests.e2e.conftest import TEST_PLUGIN_DIR, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "event-key-probe"


def records(data_dir: Path) -> list[dict]:
    path = data_dir / "event-keys.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def wait_for(data_dir: Path, predicate, timeout_s: float = 10.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = [record for record in records(data_dir) if predicate(record)]
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.05)


def of(key: str, session_id: str | None = None, by: str | None = None):
    return lambda r: r["key"] == key and (session_id is None or r.get("session_key") == session_id) and (by is None or r["by"] == by)


async def new_session(stub, *plugins: str, settings: dict | None = None) -> store_pb2.Session:
    request = scheduler_pb2.CreateSessionRequest(requested_plugins=list(plugins), approved_plugins=list(plugins),
                                                 plugin_settings={k: to_struct(v) for k, v in (settings or {}).items()})
    return (await stub.CreateSession(request)).session


async def approve_the_probe(group: ServiceGroup) -> None:
    """A community plugin's code (its gateway event handlers included) loads once a session approved it."""
    async with open_channel(group.addrs["scheduler"]) as channel:
        await new_session(scheduler_pb2_grpc.SchedulerStub(channel), PROBE)


async def test_gateway_startup_is_emitted_once_the_scheduler_serves(services) -> None:
    # The probe's code does not run before a session approved it: not at the first start.
    assert await wait_for(services.data_dir, of("gateway:startup"), timeout_s=1) == []
    await approve_the_probe(services)
    # The scheduler restarted in place (SIGHUP) emits gateway:startup again once it serves.
    services.processes["scheduler"].send_signal(signal.SIGHUP)
    [startup] = await wait_for(services.data_dir, of("gateway:startup"), timeout_s=30)
    assert startup["by"] == "gateway" and startup["session_key"] is None and startup["action"] == "startup"
    assert set(startup["context"]["deps"]) == {"registry", "hooks", "gateway", "store"}
    assert startup["context"]["deps"]["hooks"] == services.addrs["hooks"]
    assert startup["context"]["workspaceDir"] == str(services.data_dir.resolve()) and startup["has_cfg"]


async def test_a_session_and_a_turn_emit_their_keys_with_their_fields(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, PROBE)
        # A plain create is no new-session command (tests/e2e/test_session_lifecycle.py has command:new).
        assert not await wait_for(services.data_dir, of("command:new", session.id), timeout_s=0.5)

        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, idempotency_key="turn-1",
                                                     actions=[resources_pb2.PlayerAction(kind="do", text="I look around.")])
        events = [event async for event in stub.SubmitActions(request)]
        turn = events[-1].turn_completed
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED

    [received] = await wait_for(services.data_dir, of("message:received", session.id))
    assert received["by"] == "message"
    assert {k: received["context"][k] for k in ("from", "content", "channelId", "messageId")} == {
        "from": "main", "content": "I look around.", "channelId": "grpc", "messageId": "turn-1"}
    assert isinstance(received["context"]["timestamp"], int) and "metadata" not in received["context"]
    [preprocessed] = await wait_for(services.data_dir, of("message:preprocessed", session.id))
    assert preprocessed["has_cfg"] and preprocessed["context"]["bodyForAgent"] == "I look around."
    assert preprocessed["context"]["body"] == "I look around." and "transcript" not in preprocessed["context"]

    [bootstrap] = await wait_for(services.data_dir, of("agent:bootstrap", session.id, by="agent"))
    context = bootstrap["context"]
    assert context["agentId"] == "narrator" and context["sessionId"] == context["sessionKey"] == session.id
    assert context["workspaceDir"] == str(REPO_ROOT / "plugins" / "narrator")
    first = context["bootstrapFiles"][0]
    assert first["name"] == "PLUGIN.md" and first["path"] == str(REPO_ROOT / "plugins" / "narrator" / "PLUGIN.md")
    assert first["missing"] is False and first["content"].startswith("You are the narrator")
    # The probe's own bootstrap handler added a file: it reached the narrator's system prompt.
    [report] = [e.hook for e in events if e.WhichOneof("event") == "hook" and e.hook.event == "PreLLMCall"]
    system = json.loads(report.message)["system"]
    assert "You are the narrator" in system and "## PROBE-NOTES.md\n\nProbe notes: the lamp is blue." in system

    [sent] = await wait_for(services.data_dir, of("message:sent", session.id))
    assert sent["context"]["success"] is True and sent["context"]["content"] == turn.narrative
    assert sent["context"]["to"] == session.id and sent["context"]["channelId"] == "grpc" and "error" not in sent["context"]
    story = [message for message in turn.messages if message.role == resources_pb2.MESSAGE_ROLE_STORY]
    assert sent["context"]["messageId"] == story[0].id


async def test_session_patch_and_command_stop(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, PROBE, "slow-probe", settings={"slow-probe": {"marker": str(services.data_dir / "x")}})
        await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=session.id, approve=[PROBE]))
        [patch] = await wait_for(services.data_dir, of("session:patch", session.id))
        assert patch["by"] == "session" and patch["has_cfg"]
        assert patch["context"]["patch"] == {"approve": [PROBE], "revoke": []}
        assert patch["context"]["sessionEntry"]["approvedPlugins"] == [PROBE, "slow-probe"]

        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I wait.")])
        started = asyncio.Event()

        async def read() -> None:
            async for event in stub.SubmitActions(request):
                if event.WhichOneof("event") == "runtime_started":
                    started.set()

        reader = asyncio.create_task(read())
        await asyncio.wait_for(started.wait(), 10)
        await stub.Cancel(scheduler_pb2.CancelRequest(session_id=session.id))
        # Awaited: the probe's handler has run by the time Cancel answers.
        [stop] = [r for r in records(services.data_dir) if of("command:stop", session.id)(r)]
        assert stop["by"] == "command"
        assert stop["context"] == {"sessionId": session.id, "commandSource": "gateway:sessions.cancel"}
        await asyncio.wait_for(reader, 10)


async def test_compaction_keys_carry_only_what_is_known(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as scheduler, services.channel_as("hooks", "scheduler") as hooks, \
            services.channel_as("store", "scheduler") as store:
        session = await new_session(scheduler_pb2_grpc.SchedulerStub(scheduler), PROBE)
        events = SchedulerEventKeys(hooks_pb2_grpc.HookDispatcherStub(hooks), store_pb2_grpc.TransactionalStoreStub(store), {})
        await events.compact_before(session, message_count=40, message_count_original=40)
        await events.compact_after(session, message_count=12, compacted_count=28, summary_length=512, first_kept_entry_id="m-29")
    [before] = [r for r in records(services.data_dir) if of("session:compact:before", session.id)(r)]
    assert before["by"] == "session" and before["context"] == {
        "sessionId": session.id, "missingSessionKey": False, "messageCount": 40, "messageCountOriginal": 40}
    [after] = [r for r in records(services.data_dir) if of("session:compact:after", session.id)(r)]
    assert after["context"] == {"sessionId": session.id, "missingSessionKey": False, "messageCount": 12, "compactedCount": 28,
                                "summaryLength": 512, "firstKeptEntryId": "m-29"}


async def test_hooks_info_lists_keys_families_and_hookspec_plugins(services) -> None:
    printed = io.StringIO()
    assert await info(services.addrs["hooks"], out=printed, security=services.security("hooks")) == 0
    out = printed.getvalue()
    assert "gateway:shutdown         bounded 5 s" in out and "gateway:pre-restart      bounded 10 s" in out
    assert f"message                  {PROBE}" in out
    assert "example-hookspecs: after_llm_call, after_tool_call, before_llm_call, before_tool_call, on_error, system_prompt" in out


async def test_a_hookspec_plugin_finishes_a_model_call_with_its_own_text(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, "example-hookspecs")
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="(pause)")])
        events = [event async for event in stub.SubmitActions(request)]
    turn = events[-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED
    assert turn.narrative == "The story holds its breath and waits for you."
    assert not [e for e in events if e.WhichOneof("event") == "narrative_delta" and e.narrative_delta.text], "nothing streamed"


async def test_a_finished_model_call_never_reaches_the_model(tmp_path) -> None:
    """LLMCallDecision.finish(text) is PreLLMCall's replace.response: the scheduler makes no model call. The
    gateway's script refuses any story call about "(pause)", so a call that were made would fail the turn."""
    script = {"rules": [{"match": "(pause)", "slots": ["story"],
                         "reply": {"error": {"status": 400, "message": "the model was asked"}}}]}
    async with running_services(tmp_path, script=script) as group:
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            session = await new_session(stub, "example-hookspecs")
            events = await submit(stub, session.id, "(pause)")
            refused = await submit(stub, session.id, "I ask the model about the (pause) anyway.")
    turn = events[-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn
    assert turn.narrative == "The story holds its breath and waits for you."
    # The same script does refuse a story call that is made.
    failed = refused[-1].turn_completed
    assert failed.status == store_pb2.TURN_STATUS_FAILED and "the model was asked" in failed.abort_reason, failed.abort_reason


async def test_turn_hooks_build_the_prompt_and_answer_instead_of_the_model(tmp_path) -> None:
    """turn-hooks-probe (written against the spec's signatures): load_state's state reaches build_prompt, which
    rewrites the narrator's prompt; run_model answers its call with a story quoting that prompt (the gateway
    refuses any story call); after the turn, save_state and render_outbound/dispatch_outbound see the story."""
    script = {"rules": [{"match": "lantern", "slots": ["story"], "reply": {"error": {"status": 400, "message": "the model was asked"}}}]}
    async with running_services(tmp_path, script=script) as group:
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            session = await new_session(stub, "turn-hooks-probe")
            events = await submit(stub, session.id, "I light the lantern.")
    turn = events[-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    # build_tape_context marked the player's line in the narrator's conversation, before build_prompt.
    assert turn.narrative == "The plugin answered: [built, curious] ~I light the lantern."
    # After the story was handed to the client (message:sent): the sidecar, save_state, render_outbound -> dispatch_outbound.
    deadline = time.monotonic() + 10
    while len(heard := [r for r in jsonl(tmp_path, "turn-hooks-probe.jsonl") if r["session_id"] == session.id]) < 4:
        assert time.monotonic() < deadline, heard
        await asyncio.sleep(0.1)
    user, story, saved, sent = heard
    assert (user["hook"], user["role"], user["content"]) == ("on_append", "user", "I light the lantern.")
    assert (story["hook"], story["role"], story["content"]) == ("on_append", "story", turn.narrative)
    assert saved == {"hook": "save_state", "session_id": session.id, "mood": "curious", "heard": "I light the lantern.",
                     "message": "I light the lantern.", "model_output": turn.narrative}
    assert sent == {"hook": "dispatch_outbound", "channel": "probe", "session_id": session.id, "content": turn.narrative.upper()}


async def timed_submit(stub, session_id: str, text: str) -> list[tuple[float, scheduler_pb2.TurnEvent]]:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)])
    return [(time.monotonic(), event) async for event in stub.SubmitActions(request)]


def story_deltas(events) -> list[tuple[float, str, bool]]:
    return [(at, e.narrative_delta.text, e.narrative_delta.reset) for at, e in events if e.WhichOneof("event") == "narrative_delta"]


async def test_run_model_stream_and_provide_model_options_through_the_services(tmp_path) -> None:
    """run_model_stream answers the narrator, streamed to the client piece by piece as the plugin writes it (the
    hooks service's StreamModelAnswer, read by the scheduler); one that fails midway leaves the call to the model,
    what streamed of it withdrawn; provide_model_options puts a session's calls on the gateway's default slot,
    which the script's story-slot refusal does not cover."""
    script = {"rules": [{"match": "lantern", "slots": ["story"], "reply": {"error": {"status": 400, "message": "the story slot was asked"}}}]}
    async with running_services(tmp_path, script=script) as group:
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            streamed = await new_session(stub, "turn-hooks-probe", settings={"turn-hooks-probe": {"mode": "stream"}})
            streamed_events = await timed_submit(stub, streamed.id, "I light the lantern.")
            failing = await new_session(stub, "turn-hooks-probe", settings={"turn-hooks-probe": {"mode": "stream-fails"}})
            failing_events = await timed_submit(stub, failing.id, "I open the door.")
            chosen = await new_session(stub, "model-options-probe")
            chosen_turn = (await submit(stub, chosen.id, "I light the lantern."))[-1].turn_completed
            plain = await new_session(stub)
            plain_turn = (await submit(stub, plain.id, "I light the lantern."))[-1].turn_completed
    streamed_turn = streamed_events[-1][1].turn_completed
    assert streamed_turn.status == store_pb2.TURN_STATUS_COMMITTED, streamed_turn.abort_reason
    assert streamed_turn.narrative == "The plugin streamed: [built, curious] ~I light the lantern."
    # The story text came in several pieces, as the plugin wrote them (50 ms apart), before the turn completed.
    deltas = story_deltas(streamed_events)
    assert len(deltas) >= 3 and not any(reset for _, _, reset in deltas), deltas
    assert "".join(text for _, text, _ in deltas) == streamed_turn.narrative
    assert deltas[-1][0] - deltas[0][0] >= 0.1 and deltas[-1][0] <= streamed_events[-1][0]
    # Failed after five pieces: what the player saw of it withdrawn (a reset), then the model's story streamed and committed.
    failing_turn = failing_events[-1][1].turn_completed
    assert failing_turn.status == store_pb2.TURN_STATUS_COMMITTED, failing_turn.abort_reason
    failed = story_deltas(failing_events)
    resets = [index for index, (_, _, reset) in enumerate(failed) if reset]
    seen = "".join(text for _, text, _ in failed[:resets[0]]) if resets else ""
    assert len(seen) > 10 and "The plugin streamed: [built, curious] I open the door.".startswith(seen), failed
    assert "".join(text for _, text, _ in failed[resets[-1] + 1:]) == failing_turn.narrative
    assert "plugin streamed" not in failing_turn.narrative
    [stream_failed] = [e.hook for _, e in failing_events if e.WhichOneof("event") == "hook" and e.hook.event == "model.plugin_stream_failed"]
    assert "the plugin's model went away" in json.loads(stream_failed.message)["error"]
    assert chosen_turn.status == store_pb2.TURN_STATUS_COMMITTED, chosen_turn.abort_reason
    assert plain_turn.status == store_pb2.TURN_STATUS_FAILED and "the story slot was asked" in plain_turn.abort_reason


async def test_a_steering_inbox_joins_the_narrators_run_as_an_interjection(services) -> None:
    """steering-probe's inbox is drained at the narrator's step (PreStep with steering); turn-hooks-probe's
    run_model answers quoting the last user message: the interjection, as Interject would have put it."""
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, "turn-hooks-probe", "steering-probe")
        turn = (await submit(stub, session.id, "I light the lantern."))[-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    assert turn.narrative == "Unbuilt prompt: (The player interjects) Psst, the lantern is already lit!"


async def test_shutdown_and_restart_waits_are_bounded_and_handlers_run_to_their_end(tmp_path) -> None:
    """Budgets 1 s (shutdown) and 2 s (pre-restart) instead of 5 s and 10 s; handlers take 3 s."""
    env = {"COVEL_PLUGIN_DIRS": os.pathsep.join([str(REPO_ROOT / "plugins"), str(TEST_PLUGIN_DIR)]),
           "COVEL_SCHEDULER_SHUTDOWN_HOOK_BUDGET_MS": "1000", "COVEL_SCHEDULER_PRE_RESTART_HOOK_BUDGET_MS": "2000",
           "EVENT_KEY_PROBE_SLEEP_S": "3"}
    group = ServiceGroup(free_port_addrs(), tmp_path, extra_env=env)
    try:
        await group.start()
        await approve_the_probe(group)
        scheduler = group.processes["scheduler"]
        # SIGHUP: the scheduler restarts in place (same pid): pre-restart, then shutdown, each bounded.
        hup = time.time()
        scheduler.send_signal(signal.SIGHUP)
        [shutdown] = await wait_for(tmp_path, of("gateway:shutdown", by="gateway"), timeout_s=15)
        [pre_restart] = await wait_for(tmp_path, of("gateway:pre-restart", by="gateway"))
        assert pre_restart["context"]["reason"] == "restart" and pre_restart["context"]["restartExpectedMs"] > 0
        assert shutdown["context"] == pre_restart["context"]
        waited_pre_restart = shutdown["t"] - pre_restart["t"]
        # The budget (2 s) starts when the scheduler dispatches pre-restart, after the signal and before the handler
        # records its start (late on a loaded machine): the wait is at least 2 s from the signal, and at most 2.8 s
        # from the handler's start.
        assert shutdown["t"] - hup >= 2.0, shutdown["t"] - hup
        assert waited_pre_restart < 2.8, waited_pre_restart
        # Serving again once the restarted process is up.
        # (The first start's gateway:startup found the probe not loaded yet: no session had approved it.)
        while await check_health(group.addrs["scheduler"], timeout_s=0.5) != "SERVING" or len(records_of(tmp_path, "gateway:startup")) < 1:
            assert time.time() - hup < 30
            await asyncio.sleep(0.1)
        assert scheduler.returncode is None, "restarted in place"
        done = records_of(tmp_path, "gateway:pre-restart", by="done")
        assert done and done[0]["t"] - pre_restart["t"] >= 3.0, "the pre-restart handler was not cancelled by the budget"
        restarted_at = records_of(tmp_path, "gateway:startup")[0]["t"]
        print(f"\nSIGHUP -> pre-restart handler: {pre_restart['t'] - hup:.2f} s; pre-restart wait {waited_pre_restart:.2f} s "
              f"(budget 2 s); serving again after {restarted_at - hup:.2f} s")
        # SIGTERM: gateway:shutdown only, bounded by its budget; the scheduler exits without waiting for the handler.
        stopping = time.time()
        scheduler.send_signal(signal.SIGTERM)
        await asyncio.wait_for(scheduler.wait(), 15)
        scheduler_exit = time.time() - stopping
        assert 1.0 <= scheduler_exit < 2.5, scheduler_exit
    finally:
        await group.stop()
        stopped = time.time()
    final = [r for r in records_of(tmp_path, "gateway:shutdown", by="gateway") if r["context"]["reason"] == "shutdown"]
    assert final and final[0]["context"]["restartExpectedMs"] is None
    handler_done = [r for r in records_of(tmp_path, "gateway:shutdown", by="done") if r["t"] > final[0]["t"]]
    assert handler_done and handler_done[-1]["t"] - final[0]["t"] >= 3.0, "the shutdown handler ran to its end"
    assert handler_done[-1]["t"] <= stopped, "the hooks service joined the handler before exiting"
    print(f"SIGTERM -> scheduler exited after {scheduler_exit:.2f} s (shutdown budget 1 s); the handler finished "
          f"{handler_done[-1]['t'] - final[0]['t']:.2f} s after it started; the group stopped {stopped - stopping:.2f} s after SIGTERM")


def records_of(data_dir: Path, key: str, by: str | None = None) -> list[dict]:
    return [r for r in records(data_dir) if of(key, by=by)(r)]


async def test_reset_session_starts_over_and_emits_command_reset(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        old = await new_session(stub, PROBE, settings={PROBE: {"note": "kept"}})
        reply = await stub.ResetSession(scheduler_pb2.ResetSessionRequest(session_id=old.id))
        assert reply.previous_session.id == old.id and reply.previous_session.status == store_pb2.SESSION_STATUS_ENDED
        new = reply.session
        assert new.id != old.id and new.status == store_pb2.SESSION_STATUS_ACTIVE
        assert list(new.active_plugins) == list(old.active_plugins) and list(new.approved_plugins) == [PROBE]
        assert dict(new.plugin_settings[PROBE]) == dict(old.plugin_settings[PROBE])
        with pytest.raises(Exception) as ended:
            await stub.ResetSession(scheduler_pb2.ResetSessionRequest(session_id=old.id))
        assert "has ended" in str(ended.value)
    [reset] = await wait_for(services.data_dir, of("command:reset", new.id))
    assert reset["by"] == "command" and reset["has_cfg"]
    assert reset["context"]["commandSource"] == "gateway:sessions.reset"
    assert reset["context"]["sessionEntry"]["id"] == new.id and reset["context"]["previousSessionEntry"]["id"] == old.id
    # A reset is no new command.
    assert not [r for r in records(services.data_dir) if r["key"] == "command:new" and r.get("session_key") == new.id]


def jsonl(data_dir: Path, name: str) -> list[dict]:
    path = data_dir / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


async def submit(stub, session_id: str, text: str, key: str = "") -> list[scheduler_pb2.TurnEvent]:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, idempotency_key=key,
                                                 actions=[resources_pb2.PlayerAction(text=text)])
    return [event async for event in stub.SubmitActions(request)]


async def test_a_compacting_session_emits_both_compaction_keys_with_their_fields(services) -> None:
    """Where they fire: history compaction in a real turn (compact-probe's history.compact@2 provider)."""
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, "compact-probe", PROBE, settings={"compact-probe": {"budgetChars": 400, "keepTurns": 1}})
        turns = []
        for number in range(4):
            turns.append((await submit(stub, session.id, f"I walk to milestone {number}. Then I rest."))[-1].turn_completed)
        messages = list((await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages)
        vetoed = await new_session(stub, "compact-probe", PROBE, settings={"compact-probe": {"budgetChars": 100, "keepTurns": 1,
                                                                                            "veto": True}})
        for number in range(3):
            await submit(stub, vetoed.id, f"I walk to milestone {number}. Then I rest.")
    compacting = [turn for turn in turns if any(entry.event == "PostCompaction" for entry in turn.hook_trace)]
    assert compacting
    # Awaited: recorded by the time the turn answered.
    befores = [r for r in records(services.data_dir) if of("session:compact:before", session.id)(r)]
    afters = [r for r in records(services.data_dir) if of("session:compact:after", session.id)(r)]
    assert len(befores) == len(afters) == len(compacting)
    summaries = [m for m in messages if m.role == resources_pb2.MESSAGE_ROLE_SUMMARY]
    for before, after, summary in zip(befores, afters, summaries):
        assert before["by"] == after["by"] == "session" and before["t"] <= after["t"]
        assert set(before["context"]) == {"sessionId", "missingSessionKey", "messageCount", "messageCountOriginal"}
        assert before["context"]["sessionId"] == session.id and before["context"]["missingSessionKey"] is False
        # In full in the prompt (since the latest summary), and the whole stored log.
        assert 2 <= before["context"]["messageCount"] <= before["context"]["messageCountOriginal"]
        # No token counts are known: absent, never zero.
        assert set(after["context"]) == {"sessionId", "missingSessionKey", "messageCount", "compactedCount", "summaryLength",
                                         "firstKeptEntryId"}
        assert after["context"]["summaryLength"] == len(summary.text)
        through = from_struct(summary.metadata)["throughSeq"]
        first_kept = next(m for m in messages if m.role in (resources_pb2.MESSAGE_ROLE_PLAYER, resources_pb2.MESSAGE_ROLE_STORY) and m.seq > through)
        assert after["context"]["firstKeptEntryId"] == first_kept.id
        assert 0 < after["context"]["compactedCount"] < before["context"]["messageCount"]
        # What is left live after the fold: the log before it, less what it folded.
        assert after["context"]["messageCount"] == before["context"]["messageCount"] - after["context"]["compactedCount"]
    # A PreCompaction abort: no compaction job, so neither key.
    assert not [r for r in records(services.data_dir) if r.get("session_key") == vetoed.id and r["key"].startswith("session:compact")]


async def test_message_keys_fire_for_an_accepted_turn_only(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, PROBE)
        first = await submit(stub, session.id, "I knock.", key="knock-1")
        # A retried submit: answered with the first turn, nothing runs and nothing is received again.
        again = await submit(stub, session.id, "I knock.", key="knock-1")
        assert again[-1].turn_completed.id == first[-1].turn_completed.id
        assert not [e for e in again if e.WhichOneof("event") == "turn_started"]
        # A refused submit: the session has ended.
        await stub.EndSession(scheduler_pb2.EndSessionRequest(session_id=session.id))
        with pytest.raises(grpc.aio.AioRpcError):
            await submit(stub, session.id, "I knock again.", key="knock-2")
    await wait_for(services.data_dir, of("message:sent", session.id))
    await asyncio.sleep(1.0)
    for key in ("message:received", "message:preprocessed"):
        seen = [r for r in records(services.data_dir) if of(key, session.id)(r)]
        assert [r["context"]["messageId"] for r in seen] == ["knock-1"], (key, seen)


async def test_message_sent_reports_a_story_the_client_never_got(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, PROBE)
        call = stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I shout and run away.")]))
        async for event in call:
            if event.WhichOneof("event") == "turn_started":
                # The client goes away while the turn runs; the turn goes on and commits.
                call.cancel()
                break
    [sent] = await wait_for(services.data_dir, of("message:sent", session.id), timeout_s=20)
    assert sent["context"]["success"] is False
    assert sent["context"]["error"] == "the client went away before the story was delivered"
    assert sent["context"]["content"] and sent["context"]["to"] == session.id and sent["context"]["messageId"]


async def test_an_observed_key_does_not_delay_the_turn(services) -> None:
    """event-key-sleeper takes 2 s per message key; the turn does not wait for it."""
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, "event-key-sleeper")
        await submit(stub, session.id, "I warm up.")  # the first turn of a session pays for caches
        started = time.monotonic()
        events = await submit(stub, session.id, "I sit down.")
        took = time.monotonic() - started
    assert events[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
    assert took < 1.5, f"the turn took {took:.2f} s with 2 s observed handlers"
    deadline = time.monotonic() + 15
    while True:
        ended = [r for r in jsonl(services.data_dir, "event-key-sleeper.jsonl")
                 if r["session_key"] == session.id and r["key"] == "message:received" and r["phase"] == "end"]
        if len(ended) == 2 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert len(ended) == 2, "the handlers ran to their end after the turn answered"
    print(f"\nturn with 2 s observed message handlers: {took * 1000:.0f} ms")


async def play_hookspec_probe(services, decision: str, *extra: str, settings: dict | None = None):
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, "hookspec-probe", *extra, settings={"hookspec-probe": {"decision": decision},
                                                                              **(settings or {})})
        events = await submit(stub, session.id, "I read the sign.")
    turn = events[-1].turn_completed
    # Its hooks hear every runtime's calls: those of its own runtime.
    heard = [r for r in jsonl(services.data_dir, "hookspec-probe.jsonl")
             if r["session_id"] == session.id and r["runtime_id"] == "hookspec-probe"]
    return {r.runtime_id: r for r in turn.runtime_results}["hookspec-probe"], heard


async def test_replace_gives_the_agent_loop_a_successful_tool_result_without_running_the_tool(services) -> None:
    result, heard = await play_hookspec_probe(services, "replace")
    # finishWith: save-note needs a successful call: the replacement is that call's data and the runtime's output.
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    assert from_struct(result.output) == {"saved": "from the hook", "by": "hookspec-probe"}
    assert not [r for r in heard if r["hook"] == "tool-ran"], "the tool never ran"
    tools = [r for r in heard if r["hook"] == "after_tool_call"]
    assert tools and tools[0]["tool"] == "save-note" and tools[0]["error"] is None
    assert tools[0]["result"] == {"saved": "from the hook", "by": "hookspec-probe"}
    llm = [r for r in heard if r["hook"] == "after_llm_call"]
    assert llm and all(r["error"] is None and set(r["usage"]) >= {"promptTokens", "completionTokens"} for r in llm)


async def test_deny_refuses_the_call_in_the_agent_loop(services) -> None:
    result, heard = await play_hookspec_probe(services, "deny")
    assert result.status == resources_pb2.RUNTIME_STATUS_FAILED, "every save-note call was refused, so finishWith never succeeded"
    assert not [r for r in heard if r["hook"] == "tool-ran"]
    refused = [r for r in heard if r["hook"] == "after_tool_call"]
    assert refused and all(r["error"] == "refused" and r["message"] == "hookspec-probe says no" for r in refused)
    without = await play_hookspec_probe(services, "")
    assert without[0].status == resources_pb2.RUNTIME_STATUS_SUCCESS and [r for r in without[1] if r["hook"] == "tool-ran"]


async def test_after_tool_call_hears_of_a_call_another_plugin_refused(services) -> None:
    """tool-probe's PreToolUse aborts the hookspec plugin's runtime's calls (a plain covel.on handler)."""
    result, heard = await play_hookspec_probe(services, "", "tool-probe",
                                              settings={"tool-probe": {"runtime": "hookspec-probe", "veto": True}})
    assert result.status == resources_pb2.RUNTIME_STATUS_FAILED and not [r for r in heard if r["hook"] == "tool-ran"]
    refused = [r for r in heard if r["hook"] == "after_tool_call"]
    assert refused and all(r["error"] == "refused" and r["message"] == "tool-probe refuses this call" for r in refused)


async def test_after_llm_call_hears_of_a_failed_model_call(tmp_path) -> None:
    """The model refuses the hookspec probe's call (a 400 is not retried): after_llm_call gets it with error set."""
    script = {"rules": [{"match": "I break the model", "slots": ["plugin"],
                         "reply": {"error": {"status": 400, "message": "the request was refused"}}}]}
    async with running_services(tmp_path, script=script) as group:
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            session = await new_session(stub, "hookspec-probe")
            events = await submit(stub, session.id, "I break the model.")
    [result] = [r for r in events[-1].turn_completed.runtime_results if r.runtime_id == "hookspec-probe"]
    assert result.status == resources_pb2.RUNTIME_STATUS_FAILED and "refused" in result.reason, result.reason
    heard = [r for r in jsonl(tmp_path, "hookspec-probe.jsonl")
             if r["session_id"] == session.id and r["runtime_id"] == "hookspec-probe" and r["hook"] == "after_llm_call"]
    assert len(heard) == 1 and heard[0]["usage"] is None
    assert heard[0]["error"] == result.reason
