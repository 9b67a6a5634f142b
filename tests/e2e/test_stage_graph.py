"""Function runtimes in a stage's dependency graph, through all five services."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from shared.structs import from_struct

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_layers_cycle_gates_timeouts_and_triggers(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["graph-probe"], approved_plugins=["graph-probe"]))).session

        async def turn(text: str) -> tuple[store_pb2.Turn, list[str]]:
            request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text=text)])
            events = [event async for event in stub.SubmitActions(request)]
            started = [e.runtime_started.runtime_id for e in events if e.WhichOneof("event") == "runtime_started"]
            return events[-1].turn_completed, started

        first, started = await turn("I wait by the fire.")
        results = {r.runtime_id: r for r in first.runtime_results}
        assert first.status == store_pb2.TURN_STATUS_COMMITTED, "side branches failing never stop the story"
        assert results["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
        # Layers: a (with fails, slow) → b, c, gated → d; the cycle never starts.
        order = [r for r in started if r.startswith("graph-probe/")]
        assert order.index("graph-probe/a") < order.index("graph-probe/b") < order.index("graph-probe/d")
        assert order.index("graph-probe/c") < order.index("graph-probe/d")
        assert "graph-probe/x" not in order and "graph-probe/y" not in order
        assert results["graph-probe/x"].reason == "dependency-cycle: graph-probe/x → graph-probe/y → graph-probe/x"
        assert results["graph-probe/y"].status == resources_pb2.RUNTIME_STATUS_SKIPPED
        assert from_struct(results["graph-probe/d"].output) == {"sum": 3, "note": "c-done", "previousRoll": "none"}
        assert from_struct(results["graph-probe/c"].output) == {"value": "c-done"}
        assert results["graph-probe/fails"].status == resources_pb2.RUNTIME_STATUS_FAILED and "fails on purpose" in results["graph-probe/fails"].reason
        assert results["graph-probe/gated"].status == resources_pb2.RUNTIME_STATUS_SKIPPED
        assert "graph-probe/fails did not succeed" in results["graph-probe/gated"].reason
        assert results["graph-probe/slow"].status == resources_pb2.RUNTIME_STATUS_FAILED and "100 ms" in results["graph-probe/slow"].reason
        assert "graph-probe/every-other" not in results, "every: 2 skips turn 1"
        roll = from_struct(results["graph-probe/a"].output)["roll"]
        digest = from_struct(results["graph-probe/digest"].output)
        assert digest["player"] == "I wait by the fire."
        assert digest["story"] and first.narrative.startswith(digest["story"])
        assert digest["narrator"] == [{"runtimeId": "narrator", "status": "success"}] and digest["ops"] == {"operations": []}

        second, _ = await turn("I keep waiting.")
        results = {r.runtime_id: r for r in second.runtime_results}
        assert from_struct(results["graph-probe/every-other"].output) == {"value": 2}
        assert from_struct(results["graph-probe/d"].output)["previousRoll"] == roll, "turn one's write was committed"


async def test_outputs_are_checked_against_published_schemas_and_failures_commit_nothing(services) -> None:
    from covel.store.v1 import store_pb2_grpc

    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["contract-probe"], approved_plugins=["contract-probe"]))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I count.")])
        turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
        counts = (await store_pb2_grpc.TransactionalStoreStub(store_channel).ListPluginData(
            store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id="contract-probe", namespace="counts"))).entries
    results = {r.runtime_id: r for r in turn.runtime_results}
    assert results["contract-probe/good"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    assert from_struct(results["contract-probe/scalar"].output) == {"value": 7}
    # The published contract probe.count@1 (root contracts) rejects bad's value at the output boundary.
    bad = results["contract-probe/bad"]
    assert bad.status == resources_pb2.RUNTIME_STATUS_FAILED and bad.reason.startswith("output-schema-invalid")
    assert "/count" in bad.reason and "extra" in bad.reason
    assert [entry.key for entry in counts] == ["good"], "bad's write never reached the store"
    # JSON null is a value: it is checked like any other and projected as {value: null}.
    null_value = results["contract-probe/null-value"]
    assert null_value.status == resources_pb2.RUNTIME_STATUS_SUCCESS and from_struct(null_value.output) == {"value": None}
    null_bad = results["contract-probe/null-bad"]
    assert null_bad.status == resources_pb2.RUNTIME_STATUS_FAILED and null_bad.reason.startswith("output-schema-invalid"), null_bad.reason


async def test_in_execution_plugin_data_visibility_and_read_dependencies(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["data-probe"], approved_plugins=["data-probe"]))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I take notes.")])
        turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    results = {r.runtime_id: from_struct(r.output) for r in turn.runtime_results}
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED
    assert results["data-probe/sibling"] == {"a": "unseen"}, "a sibling of the same layer does not see the write"
    assert results["data-probe/reader"] == {"a": 1, "all": {"a": 1, "count": 2}}, "upstream buffered writes are visible"
    assert results["data-probe/dependent"] == {"seen": "from bad-writer"}
    discarded = {unit.unit_runtime_id: unit.reason for unit in turn.discarded_units}
    assert "data-probe/bad-writer" in discarded
    assert discarded["data-probe/dependent"] == "read data of data-probe/bad-writer that did not commit"
    assert "narrator" not in discarded and turn.narrative


async def test_run_manual_in_the_foreground_and_in_the_background(services) -> None:
    import asyncio

    import grpc

    from shared.structs import to_struct

    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["graph-probe"], approved_plugins=["graph-probe"]))).session
        request = scheduler_pb2.RunManualRequest(session_id=session.id, runtime_id="graph-probe/on-demand", payload=to_struct({"note": "hi"}))
        events = [event async for event in stub.RunManual(request)]
        turn = events[-1].turn_completed
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED and turn.origin == resources_pb2.TURN_ORIGIN_MANUAL
        [result] = turn.runtime_results
        assert from_struct(result.output) == {"got": {"note": "hi"}, "origin": "manual"}

        background = scheduler_pb2.RunManualRequest(session_id=session.id, runtime_id="graph-probe/on-demand", background=True)
        events = [event async for event in stub.RunManual(background)]
        assert [e.WhichOneof("event") for e in events] == ["turn_started"], "background answers at once"
        job = events[0].turn_started.turn_id
        for _ in range(100):
            try:
                recorded = (await stub.GetTurn(scheduler_pb2.GetTurnRequest(session_id=session.id, turn_id=job))).turn
                break
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.NOT_FOUND
                await asyncio.sleep(0.05)
        assert recorded.origin == resources_pb2.TURN_ORIGIN_BACKGROUND and recorded.status == store_pb2.TURN_STATUS_COMMITTED

        for runtime_id, code in (("graph-probe/nope", grpc.StatusCode.NOT_FOUND), ("graph-probe/a", grpc.StatusCode.FAILED_PRECONDITION)):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                _ = [e async for e in stub.RunManual(scheduler_pb2.RunManualRequest(session_id=session.id, runtime_id=runtime_id))]
            assert raised.value.code() == code
        after = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I carry on.")]))][-1].turn_completed
        assert after.status == store_pb2.TURN_STATUS_COMMITTED and after.logical_turn == 1, "the failed requests released the lease"


async def test_event_runtimes_follow_topics_of_successful_producers_layer_by_layer(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["event-probe"], approved_plugins=["event-probe"]))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I ring the bell.")])
        events = [event async for event in stub.SubmitActions(request)]
    turn = events[-1].turn_completed
    results = {r.runtime_id: r for r in turn.runtime_results}
    started = [e.runtime_started.runtime_id for e in events if e.WhichOneof("event") == "runtime_started"]
    assert started.index("event-probe/follower") < started.index("event-probe/second")
    assert from_struct(results["event-probe/follower"].output) == {"from": "event-probe/source"}
    assert from_struct(results["event-probe/second"].output) == {"echo": {"heard": 1}}
    assert "event-probe/never" not in results, "a failed producer's events trigger nothing"
    assert [event.name for event in turn.events] == ["probe.rang", "probe.echo"]


@pytest.mark.parametrize("skip", [True, False])
async def test_a_guard_skips_with_an_output_or_lets_the_runtime_run(services, skip) -> None:
    from covel.store.v1 import store_pb2_grpc
    from shared.structs import from_value, to_struct

    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["guard-probe"], approved_plugins=["guard-probe"], plugin_settings={"guard-probe": to_struct({"skip": skip})}))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I count.")])
        turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
        data = (await store_pb2_grpc.TransactionalStoreStub(store_channel).ListPluginData(
            store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id="guard-probe"))).entries
    results = {r.runtime_id: r for r in turn.runtime_results}
    guarded, consumer = results["guard-probe/guarded"], results["guard-probe/consumer"]
    stored = {entry.key: from_value(entry.value) for entry in data}
    if skip:
        assert (guarded.status, from_struct(guarded.output)) == (resources_pb2.RUNTIME_STATUS_SKIPPED, {"count": 5}), guarded.reason
        assert from_struct(consumer.output) == {"got": 5}, "a guard's skip output binds like any output"
        assert stored == {"kept": "the guard skipped"}
    else:
        assert (guarded.status, from_struct(guarded.output)) == (resources_pb2.RUNTIME_STATUS_SUCCESS, {"count": 1})
        assert from_struct(consumer.output) == {"got": 1}
        assert stored == {}, "a guard that does not skip commits none of its writes"


async def test_recursive_call_nests_same_package_runtimes_with_a_depth_limit(services) -> None:
    from covel.store.v1 import store_pb2_grpc
    from shared.structs import from_value

    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["data-probe"], approved_plugins=["data-probe"]))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I nest.")])
        turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
        deep = [event async for event in stub.RunManual(scheduler_pb2.RunManualRequest(
            session_id=session.id, runtime_id="data-probe/deep"))][-1].turn_completed
        data = (await store_pb2_grpc.TransactionalStoreStub(store_channel).ListPluginData(
            store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id="data-probe", namespace="nested"))).entries
    results = {r.runtime_id: from_struct(r.output) for r in turn.runtime_results}
    assert results["data-probe/parent"] == {
        "child": {"status": "success", "reason": "", "output": {"doubled": 4, "depth": 1}}, "seen": 2}
    assert "data-probe/child" not in results, "a nested run is part of its parent, not a runtime result of its own"
    assert [(e.key, from_value(e.value)) for e in data] == [("k", 2)], "the nested write committed with its parent"
    assert "graph-probe/a" in results["data-probe/outsider"]["refused"]
    deepest = from_struct(deep.runtime_results[0].output)
    assert deepest["deepest"] == 10 and "depth limit (10)" in deepest["error"]


async def test_concealed_runtimes_show_clients_only_name_status_and_time(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["concealed-probe"], approved_plugins=["concealed-probe"]))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I look for clues.")])
        events = [event async for event in stub.SubmitActions(request)]
        turn = events[-1].turn_completed
        fetched = (await stub.GetTurn(scheduler_pb2.GetTurnRequest(session_id=session.id, turn_id=turn.id))).turn
        listed = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))).turns
    seen = "".join(str(event) for event in events) + str(fetched) + str(listed)
    assert "butler" not in seen and "under the mat" not in seen
    results = {r.runtime_id: r for r in fetched.runtime_results}
    assert results["concealed-probe/plotter"].status == resources_pb2.RUNTIME_STATUS_SUCCESS and not results["concealed-probe/plotter"].HasField("output")
    assert results["concealed-probe/failing"].reason == "this part of the story could not be prepared; the details are hidden"
    assert from_struct(results["concealed-probe/reader"].output) == {"knows": True}, "code still reads the full value"
    assert "under the mat" in (services.log_dir / "scheduler.log").read_text(), "the real reason is in the server log"


async def test_a_rolled_back_turn_does_not_count_towards_max_trigger_count_or_cooldown(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["trigger-probe"], approved_plugins=["trigger-probe"]))).session
        ran, statuses = [], []
        for text in ("I start.", "I start again.", "I go on.", "I go on again."):
            request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text=text)])
            turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
            statuses.append((turn.status, turn.logical_turn))
            ran.append(sorted(r.runtime_id.removeprefix("trigger-probe/") for r in turn.runtime_results
                              if r.runtime_id.startswith("trigger-probe/") and r.status == resources_pb2.RUNTIME_STATUS_SUCCESS))
    assert statuses == [(store_pb2.TURN_STATUS_FAILED, 1), (store_pb2.TURN_STATUS_COMMITTED, 1),
                        (store_pb2.TURN_STATUS_COMMITTED, 2), (store_pb2.TURN_STATUS_COMMITTED, 3)]
    # The rolled-back first turn ran both; neither run counts: maxTriggerCount 1 and cooldown 1 start over.
    assert ran == [["cool", "once"], ["cool", "once"], [], ["cool"]]


async def test_a_required_turn_input_without_a_value_gates_its_consumer(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["gate-probe"], approved_plugins=["gate-probe"]))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I test the gates.")])
        turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    results = {r.runtime_id: r for r in turn.runtime_results}
    assert results["gate-probe/empty"].status == resources_pb2.RUNTIME_STATUS_SUCCESS and results["gate-probe/partial"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    # The producer succeeded, but returned no value / has nothing at the selected pointer: a required input gates.
    no_value = results["gate-probe/needs-value"]
    assert no_value.status == resources_pb2.RUNTIME_STATUS_SKIPPED and no_value.reason.startswith("input nothing: gate-probe/empty gave no value"), no_value.reason
    missed = results["gate-probe/needs-select"]
    assert (missed.status, missed.reason) == (resources_pb2.RUNTIME_STATUS_SKIPPED, "input missing: select /missing matched nothing in the output of gate-probe/partial")
    # An optional one is left out and the consumer runs; a matching select binds.
    assert results["gate-probe/optional-select"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    assert from_struct(results["gate-probe/optional-select"].output) == {"inputs": {}}
    assert from_struct(results["gate-probe/fine"].output) == {"inputs": {"a": 1}}
