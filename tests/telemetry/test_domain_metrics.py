"""Domain metrics a turn through the five services does not reach (tests/telemetry/test_observability.py
covers those): model-call retries, successful and failed, against a real local HTTP provider; and
the store's commit and proposal counters for turns that did not commit."""

from __future__ import annotations

import grpc
import pytest

from covel.store.v1 import store_pb2, store_pb2_grpc
from services.store.server import start as start_store
from services.store.server import wait_closed
from services.store.settings import StoreSettings
from shared.telemetry import metrics
from tests.conftest import free_addr
from tests.gateway.conftest import running_gateway
from tests.gateway.fake_openai import FakeOpenAI, JsonReply, completion
from tests.gateway.test_openai_compatible import openai_settings, request
from tests.store.helpers import acquire, commit, commit_turn, data_proposal, new_session, story_proposal, story_result, turn_for
from tests.support.identities import bare_channel_as, service_tls
from tests.telemetry.scrape import metric_value, scrape


def _port() -> int:
    return int(free_addr().rpartition(":")[2])


@pytest.fixture
def fake_openai():
    with FakeOpenAI() as server:
        yield server


async def test_model_call_retries_are_counted_for_answered_and_failed_calls(fake_openai: FakeOpenAI, monkeypatch):
    # The counters are process-wide: compare before and after.
    fake_openai.responses += [
        JsonReply(500, {"error": {"message": "boom"}}), JsonReply(body=completion("ok")),  # answered on the 2nd attempt
        *(JsonReply(500, {"error": {"message": "down"}}) for _ in range(3)),  # never answered: 3 attempts
    ]
    settings = openai_settings(fake_openai, monkeypatch, gateway_max_attempts=3, metrics_port=_port())
    async with running_gateway(**settings) as gateway:
        before = scrape(metrics.serving_port())
        reply = await gateway.GenerateOnce(request())
        assert reply.attempts == 2
        answered = scrape(metrics.serving_port())
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(request())
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        failed = scrape(metrics.serving_port())
    assert not metrics.enabled(), "the gateway's stop stops /metrics"

    def delta(after, name, **labels) -> float:
        return metric_value(after, name, **labels) - metric_value(before, name, **labels)

    provider = reply.provider
    assert provider
    assert delta(answered, "covel_model_call_retries_total", slot="story", provider=provider) == 1
    assert delta(answered, "covel_model_call_duration_seconds_count", slot="story", provider=provider, outcome="stop") == 1
    # The failed call's attempts count (it used to record none), under the provider it last tried.
    assert delta(failed, "covel_model_call_retries_total", slot="story", provider=provider) == 1 + 2
    assert delta(failed, "covel_model_call_duration_seconds_count", slot="story", provider=provider, outcome="resource_exhausted") == 1
    assert len(fake_openai.requests) == 5


async def test_store_counts_turns_that_did_not_commit_and_rejected_proposals(tmp_path):
    settings = StoreSettings(data_dir=tmp_path, store_addr=free_addr(), store_metrics_port=_port(), **service_tls("store"))
    running = await start_store(settings)
    try:
        async with bare_channel_as(settings.store_addr, "scheduler") as channel:
            stub = store_pb2_grpc.TransactionalStoreStub(channel)
            before = scrape(metrics.serving_port())
            session = await new_session(stub)
            # Aborted by a TurnStart guard: its proposal is discarded.
            lease = (await acquire(stub, session.id)).lease
            await commit(stub, lease, turn_for(lease, status=store_pb2.TURN_STATUS_ABORTED, abort_reason="guard"),
                         [story_proposal("never told")])
            # A rejected story proposal fails the turn and discards the rest.
            lease = (await acquire(stub, session.id)).lease
            bad = story_proposal("")
            bad.type = "narrative.explode"
            reply = await commit(stub, lease, turn_for(lease, runtime_results=[story_result()]),
                                 [data_proposal("notes", "k", 1), story_proposal("half"), bad])
            assert reply.turn.status == store_pb2.TURN_STATUS_FAILED
            # Committed, with one non-story unit rejected.
            lease = (await acquire(stub, session.id)).lease
            reply = await commit(stub, lease, turn_for(lease, runtime_results=[story_result()]),
                                 [data_proposal("_kernel", "x", 1, plugin_id="tracker", runtime_id="tracker"), story_proposal("calm")])
            assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED
            # Two detached jobs queued; a worker's poll (a claim) takes one and shows the queue's depth.
            await commit_turn(stub, session.id, detached_jobs=[store_pb2.DetachedJobSpec(plugin_id="p", runtime_id=f"p/{n}") for n in (1, 2)])
            await stub.ClaimDetachedJob(store_pb2.ClaimDetachedJobRequest(holder="w", session_id=session.id))
            await stub.ClaimDetachedJob(store_pb2.ClaimDetachedJobRequest(holder="w", session_id="none-such"))
            after = scrape(metrics.serving_port())
    finally:
        await running.stop(0)
        await wait_closed()

    def delta(name, **labels) -> float:
        return metric_value(after, name, **labels) - metric_value(before, name, **labels)

    assert {status: delta("covel_store_commits_total", status=status) for status in ("committed", "aborted", "failed")} == \
        {"committed": 2, "aborted": 1, "failed": 1}
    assert {outcome: delta("covel_store_proposals_total", outcome=outcome) for outcome in ("committed", "rejected", "discarded")} == \
        {"committed": 2, "rejected": 2, "discarded": 3}
    assert (metric_value(after, "covel_detached_jobs", status="queued"), metric_value(after, "covel_detached_jobs", status="running")) == (1, 1)
    assert 0 <= metric_value(after, "covel_detached_oldest_queued_seconds") < 60
