"""HandlerResult through the five services: effects (proposals, events, plugin data, notifications, UI blocks,
interactions) and completion; a setup runtime that says pending keeps the session in setup, one its guard skips is
waived; malformed effects fail the runtime; channel-named business values do nothing."""

from __future__ import annotations

import json

import grpc
import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value, to_struct
from tests.support.builtin_plugins import SETUP_PLUGINS

# Its own sessions only: the session's shared group (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "effects-probe"


async def submit(stub, session_id: str, text: str) -> list:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)])
    return [event async for event in stub.SubmitActions(request)]


async def plugin_data(services, session_id: str) -> dict:
    async with services.channel_as("store", "scheduler") as channel:
        reply = await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(
            store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=PROBE))
    return {(entry.namespace, entry.key): entry for entry in reply.entries}


async def test_effects_reach_the_player_and_completion_decides_setup(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        assert session.phase == resources_pb2.SESSION_PHASE_SETUP

        events = await submit(stub, session.id, "Hello")
        kinds = [event.WhichOneof("event") for event in events]
        turn = events[-1].turn_completed
        [notification] = [e.notification for e in events if e.WhichOneof("event") == "notification"]
        [block] = [e.ui for e in events if e.WhichOneof("event") == "ui"]
        [asked] = [e.interaction for e in events if e.WhichOneof("event") == "interaction"]
        assert kinds.index("notification") > kinds.index("proposal") and kinds[-1] == "turn_completed", "shown after the commit"
        assert (notification.level, notification.text, notification.plugin_id, notification.runtime_id) == (
            resources_pb2.NOTIFICATION_LEVEL_SUCCESS, "Welcome, traveller.", PROBE, f"{PROBE}/form")
        assert (block.id, block.slot, block.title, [from_struct(part) for part in block.parts]) == (
            "sheet", resources_pb2.UI_SLOT_RIGHT, "Sheet", [{"type": "text", "text": "No name yet"}])
        assert (asked.id, asked.kind, asked.form_id, asked.runtime_id) == ("hero-name", resources_pb2.INTERACTION_KIND_FORM, "hero", f"{PROBE}/form")
        assert from_struct(asked.spec)["schema"]["required"] == ["name"]

        form = next(r for r in turn.runtime_results if r.runtime_id == f"{PROBE}/form")
        assert form.completion == resources_pb2.SETUP_COMPLETION_PENDING and [n.text for n in form.notifications] == ["Welcome, traveller."]
        assert from_struct(form.output) == {"asked": True, "interactions": ["not a form"], "preGameDone": True}
        assert [e.name for e in turn.events] == ["effects-probe.asked"]
        stored = (await stub.GetTurn(scheduler_pb2.GetTurnRequest(session_id=session.id, turn_id=turn.id))).turn
        assert [i.id for r in stored.runtime_results for i in r.interactions] == ["hero-name"], "kept with the turn"
        assert (await plugin_data(services, session.id))[("setup", "asked")].value.bool_value is True

        after = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id))).session
        assert after.phase == resources_pb2.SESSION_PHASE_SETUP, "a pending setup runtime keeps the session in setup"
        assert from_struct(after.setup_runtimes[f"{PROBE}/form"]) == {"state": "pending", "version": "1.0.0"}
        assert from_struct(after.setup_runtimes[f"{PROBE}/known"]) == {"state": "done", "resolution": "waived", "version": "1.0.0"}

        events = await submit(stub, session.id, "I am ready.")
        after = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id))).session
        assert after.phase == resources_pb2.SESSION_PHASE_PLAYING
        assert from_struct(after.setup_runtimes[f"{PROBE}/form"]) == {"state": "done", "resolution": "completed", "version": "1.0.0"}
        assert not [e for e in events if e.WhichOneof("event") in ("notification", "ui", "interaction")]


@pytest.mark.parametrize(("variant", "reason"), [
    ("state-patches", "output-schema-invalid: effects.statePatches was removed: write the plugin's own state with effects.pluginData"),
    ("not-an-array", "output-schema-invalid: effects.notifications must be an array of objects"),
    ("bad-part", "output-schema-invalid: effects.ui[0].parts must be an array of at most 50 objects, each with a `type`"),
    ("bad-completion", "output-schema-invalid: completion is 'maybe'; one of done, pending"),
    ("unknown-channel", "output-schema-invalid: effects.sounds is not a channel"),
    ("bad-proposal", "output-schema-invalid: propose('session.delete'): a function may propose"),
])
async def test_malformed_effects_fail_the_runtime_and_write_nothing(services, variant: str, reason: str) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        events = [e async for e in stub.RunManual(scheduler_pb2.RunManualRequest(
            session_id=session.id, runtime_id=f"{PROBE}/variants", payload=to_struct({"variant": variant})))]
        [result] = [r for r in events[-1].turn_completed.runtime_results if r.runtime_id == f"{PROBE}/variants"]
        assert result.status == resources_pb2.RUNTIME_STATUS_FAILED and result.reason.startswith(reason)
        assert not result.notifications and not result.ui and not result.interactions and not result.completion


async def test_channel_named_business_values_do_nothing_and_null_keeps_its_effects(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        runs = {}
        for variant in ("channels-in-value", "null-with-effects"):
            events = [e async for e in stub.RunManual(scheduler_pb2.RunManualRequest(
                session_id=session.id, runtime_id=f"{PROBE}/variants", payload=to_struct({"variant": variant})))]
            runs[variant] = (events, events[-1].turn_completed)
        events, turn = runs["channels-in-value"]
        [result] = [r for r in turn.runtime_results if r.runtime_id == f"{PROBE}/variants"]
        assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS and not turn.events and not result.notifications and not result.completion
        assert not [e for e in events if e.WhichOneof("event") == "notification"]
        assert ("v", "k") not in await plugin_data(services, session.id)
        events, turn = runs["null-with-effects"]
        [result] = [r for r in turn.runtime_results if r.runtime_id == f"{PROBE}/variants"]
        assert result.output_json == '{"value":null}' and [n.text for n in result.notifications] == ["Saved."]


async def test_an_answer_to_a_form_is_checked_then_a_player_turn_that_closes_it(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        await submit(stub, session.id, "Hello")
        [record] = (await stub.ListInteractions(scheduler_pb2.ListInteractionsRequest(session_id=session.id))).interactions
        assert (record.interaction.id, record.status, record.interaction.form_id) == ("hero-name", resources_pb2.INTERACTION_STATUS_OPEN, "hero")

        async def answer(values: dict, interaction_id: str = "hero-name") -> list:
            request = scheduler_pb2.SubmitInteractionRequest(session_id=session.id, interaction_id=interaction_id, values=to_struct(values))
            return [event async for event in stub.SubmitInteraction(request)]

        refusals = {
            "schema": ({"name": ""}, grpc.StatusCode.INVALID_ARGUMENT, "values.name: '' should be non-empty"),
            "missing": ({}, grpc.StatusCode.INVALID_ARGUMENT, "values: 'name' is a required property"),
            "validator": ({"name": "Nobody"}, grpc.StatusCode.INVALID_ARGUMENT,
                          "actions[0].interaction.values.name: Nobody is not a name; pick one the story can call you by"),
            "unknown": ({"name": "Mira"}, grpc.StatusCode.NOT_FOUND, "this session has no interaction 'no-such-form'"),
        }
        for name, (values, code, message) in refusals.items():
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await answer(values, "no-such-form" if name == "unknown" else "hero-name")
            assert refused.value.code() == code and message in refused.value.details(), (name, refused.value.details())
        assert (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id))).session.recorded_turns == 1, "nothing recorded"

        events = await answer({"name": "Mira"})
        turn = events[-1].turn_completed
        form = next(r for r in turn.runtime_results if r.runtime_id == f"{PROBE}/form")
        assert from_struct(form.output) == {"hero": "Mira", "form": "hero", "said": "name: Mira"}
        assert turn.player_message == "name: Mira" and turn.actions[0].interaction.id == "hero-name"
        assert turn.actions[0].kind == "act", "a form's answer is an act unless the form names its actionKind (issue 40, 5)"
        assert [e.notification.text for e in events if e.WhichOneof("event") == "notification"] == ["Welcome, Mira."]
        after = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id))).session
        assert after.phase == resources_pb2.SESSION_PHASE_PLAYING
        assert (await stub.ListInteractions(scheduler_pb2.ListInteractionsRequest(session_id=session.id))).interactions == []
        [closed] = (await stub.ListInteractions(scheduler_pb2.ListInteractionsRequest(session_id=session.id, include_answered=True))).interactions
        assert (closed.status, closed.answered_turn_id, from_struct(closed.answer)) == (resources_pb2.INTERACTION_STATUS_ANSWERED, turn.id, {"name": "Mira"})
        with pytest.raises(grpc.aio.AioRpcError) as again:
            await answer({"name": "Mira"})
        assert again.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "answered already" in again.value.details()
        messages = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages
        assert [m.text for m in messages if m.role == resources_pb2.MESSAGE_ROLE_PLAYER][-1] == "name: Mira", "the answer is a player message"
        noted = await stub.InvokeAction(scheduler_pb2.InvokeActionRequest(session_id=session.id, plugin_id=PROBE, action="note",
                                                                          payload=to_struct({"topic": "people", "words": ["Mira"]})))
        assert json.loads(noted.result_json)["turnNumber"] == 2, "turnNumber counts the player's messages, the form's answer too"


async def test_commands_and_actions_run_the_plugins_handler_and_commit_under_the_dataset_rules(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        [command] = [c for c in (await stub.ListCommands(scheduler_pb2.ListCommandsRequest(session_id=session.id))).commands
                     if c.plugin_id == PROBE]
        assert (command.name, command.action, [a.name for a in command.arguments], list(command.arguments[0].choices)) == (
            "note", "note", ["topic", "words"], ["lore", "people", "bad"])

        ran = await stub.RunCommand(scheduler_pb2.RunCommandRequest(session_id=session.id, text='/note lore "the old" lighthouse'))
        assert json.loads(ran.result_json) == {"saved": "lore-18", "phase": "setup", "turnNumber": 0}
        assert ran.turn.origin == resources_pb2.TURN_ORIGIN_ACTION and [r.runtime_id for r in ran.turn.runtime_results] == [f"{PROBE}/action:note"]
        assert from_value((await plugin_data(services, session.id))[("notes", "lore-18")].value) == {"text": "the old lighthouse", "topic": "lore"}

        bad = await stub.RunCommand(scheduler_pb2.RunCommandRequest(session_id=session.id, text="/note bad"))
        [outcome] = [o for o in bad.turn.proposal_outcomes if o.code]
        assert outcome.code == "dataset-violation" and ("notes", "bad-7") not in await plugin_data(services, session.id)

        refused = {
            "/note": (grpc.StatusCode.INVALID_ARGUMENT, "text: /note needs <topic>"),
            "/note secrets x": (grpc.StatusCode.INVALID_ARGUMENT, "/note <topic> is one of lore, people, bad, not 'secrets'"),
            "/fly away": (grpc.StatusCode.NOT_FOUND, "no command /fly in this session"),
            "note lore": (grpc.StatusCode.INVALID_ARGUMENT, "a command starts with /"),
        }
        for text, (code, message) in refused.items():
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await stub.RunCommand(scheduler_pb2.RunCommandRequest(session_id=session.id, text=text))
            assert error.value.code() == code and message in error.value.details(), (text, error.value.details())
        for action, (code, message) in {"covel:approve": (grpc.StatusCode.INVALID_ARGUMENT, "reserved for the framework"),
                                        "erase": (grpc.StatusCode.NOT_FOUND, "has no action 'erase' (its actions: note)")}.items():
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await stub.InvokeAction(scheduler_pb2.InvokeActionRequest(session_id=session.id, plugin_id=PROBE, action=action))
            assert error.value.code() == code and message in error.value.details(), (action, error.value.details())
        invoked = await stub.InvokeAction(scheduler_pb2.InvokeActionRequest(
            session_id=session.id, plugin_id=PROBE, action="note", payload=to_struct({"topic": "people", "words": ["Mira"]})))
        assert json.loads(invoked.result_json)["saved"] == "people-4"


async def test_a_plugin_turned_on_mid_game_runs_its_setup_late_before_pre_turn(services) -> None:
    """Late setup: the session stays playing; the new plugin's setup runtimes run before pre-turn until done."""
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(excluded_plugins=SETUP_PLUGINS))).session
        assert session.phase == resources_pb2.SESSION_PHASE_PLAYING
        await stub.SetSessionPlugins(scheduler_pb2.SetSessionPluginsRequest(session_id=session.id, enable=[PROBE]))
        await stub.SetPluginApprovals(scheduler_pb2.SetPluginApprovalsRequest(session_id=session.id, approve=[PROBE]))
        events = await submit(stub, session.id, "I look around.")
        turn = events[-1].turn_completed
        ran = {r.runtime_id: r for r in turn.runtime_results}
        assert ran[f"{PROBE}/form"].completion == resources_pb2.SETUP_COMPLETION_PENDING and ran["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, "late setup, then the turn"
        started = [e.runtime_started.runtime_id for e in events if e.WhichOneof("event") == "runtime_started"]
        assert started.index(f"{PROBE}/form") < started.index("narrator")
        assert [e.interaction.id for e in events if e.WhichOneof("event") == "interaction"] == ["hero-name"]
        after = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id))).session
        assert after.phase == resources_pb2.SESSION_PHASE_PLAYING and from_struct(after.setup_runtimes[f"{PROBE}/form"])["state"] == "pending"

        answered = [e async for e in stub.SubmitInteraction(scheduler_pb2.SubmitInteractionRequest(
            session_id=session.id, interaction_id="hero-name", values=to_struct({"name": "Ada"})))]
        assert answered[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
        after = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id))).session
        assert from_struct(after.setup_runtimes[f"{PROBE}/form"]) == {"state": "done", "resolution": "completed", "version": "1.0.0"}
        turn = (await submit(stub, session.id, "I walk on."))[-1].turn_completed
        assert f"{PROBE}/form" not in {r.runtime_id for r in turn.runtime_results}, "done: it does not run again"


async def test_an_action_of_a_plugin_that_does_not_run_is_plugin_not_active_with_why(services) -> None:
    from shared.errors import error_info

    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        # Requested but not approved: a community plugin with server code waits for the player's approval.
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=[PROBE], excluded_plugins=SETUP_PLUGINS))).session
        for plugin_id, why in ((PROBE, "approval-required"), ("ctx-probe", "not-in-session")):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.InvokeAction(scheduler_pb2.InvokeActionRequest(session_id=session.id, plugin_id=plugin_id, action="note"))
            error = refused.value
            assert error.code() == grpc.StatusCode.NOT_FOUND and error_info(error).reason == "PLUGIN_NOT_ACTIVE"
            assert f"{plugin_id} does not run in this session ({why}:" in error.details(), error.details()
