"""One logical model call makes at most 8 HTTP attempts across the whole stack (issue 16).

The five services run against a real local HTTP server that answers 503 to every request, with
two fallback models configured: the story agent (narrator), a system agent (budget-probe/think)
and a function's ctx.gateway call (budget-probe/ask) each reach the provider 8 times, fallbacks
included, and fail with RESOURCE_EXHAUSTED naming the 8 attempts; no channel re-sends the call
with a fresh budget. A ctx.gateway call whose first send stalls is re-sent at half the time left
(COVEL_SCHEDULER_STALL_RESEND_MIN_MS scales the spec's 60 s floor down to 1 s), within the same 8.
"""

from __future__ import annotations

import os
import textwrap

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from tests.e2e.conftest import TEST_PLUGIN_DIR, minimal_session
from tests.gateway.fake_openai import FakeOpenAI, JsonReply, completion

pytestmark = pytest.mark.asyncio(loop_scope="session")

STALL_RESEND_MIN_S = 1.0
ASK_TIMEOUT_S = 6.0  # budget-probe/ask's function.timeoutMs
# Three 503s per model, then the next one; the last model gets what is left of the 8.
EXHAUSTED_MODELS = ["primary"] * 3 + ["second"] * 3 + ["third"] * 2


def unavailable() -> JsonReply:
    return JsonReply(503, {"error": {"message": "overloaded"}})


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("covel-budget")
    config = data_dir / "gateway.yaml"
    with FakeOpenAI() as provider:
        provider.default = unavailable()
        config.write_text(textwrap.dedent(f"""\
            providers:
              down:
                base_url: {provider.base_url}
            slots:
              default: {{provider: down, model: primary, fallbacks: [second, third]}}
            """))
        env = {
            "COVEL_PLUGIN_DIRS": os.pathsep.join([str(REPO_ROOT / "plugins"), str(TEST_PLUGIN_DIR)]),
            "COVEL_LOG_LEVEL": "info",
            "COVEL_GATEWAY_CONFIG": str(config),
            "COVEL_GATEWAY_RETRY_BASE_MS": "10",
            "COVEL_GATEWAY_RETRY_MAX_MS": "20",
            "COVEL_SCHEDULER_STALL_RESEND_MIN_MS": str(int(STALL_RESEND_MIN_S * 1000)),
        }
        group = ServiceGroup(free_port_addrs(), data_dir, extra_env=env)
        await group.start()
        try:
            async with open_channel(group.addrs["scheduler"]) as channel:
                stub = scheduler_pb2_grpc.SchedulerStub(channel)
                session = await stub.CreateSession(minimal_session(requested_plugins=["budget-probe"], approved_plugins=["budget-probe"]))
                yield provider, stub, session.session.id
        finally:
            await group.stop()


def models(provider: FakeOpenAI) -> list[str]:
    return [request.body["model"] for request in provider.requests]


def result_of(turn, runtime_id: str):
    [result] = [r for r in turn.runtime_results if r.runtime_id == runtime_id]
    return result


async def run_manual(stub, session_id: str, runtime_id: str):
    events = [event async for event in stub.RunManual(scheduler_pb2.RunManualRequest(session_id=session_id, runtime_id=runtime_id))]
    return result_of(events[-1].turn_completed, runtime_id)


def assert_budget_used_up(provider: FakeOpenAI, reason: str) -> None:
    assert models(provider) == EXHAUSTED_MODELS, f"{len(provider.requests)} HTTP requests for one logical call"
    assert "RESOURCE_EXHAUSTED" in reason and "after 8 attempt(s)" in reason, reason
    assert "the request budget of 8 HTTP attempts is used up" in reason, reason


async def test_a_story_agent_makes_at_most_8_requests(stack) -> None:
    provider, stub, session_id = stack
    provider.requests.clear()
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text="I wait.")])
    events = [event async for event in stub.SubmitActions(request)]
    narrator = result_of(events[-1].turn_completed, "narrator")
    assert narrator.status == resources_pb2.RUNTIME_STATUS_FAILED
    assert all(r.body.get("stream") for r in provider.requests), "the story streams"
    assert_budget_used_up(provider, narrator.reason)


async def test_a_system_agent_makes_at_most_8_requests(stack) -> None:
    provider, stub, session_id = stack
    provider.requests.clear()
    think = await run_manual(stub, session_id, "budget-probe/think")
    assert think.status == resources_pb2.RUNTIME_STATUS_FAILED
    assert all('"budget-probe/think"' in r.body["messages"][0]["content"] for r in provider.requests)
    assert_budget_used_up(provider, think.reason)


async def test_a_function_gateway_call_makes_at_most_8_requests(stack) -> None:
    provider, stub, session_id = stack
    provider.requests.clear()
    ask = await run_manual(stub, session_id, "budget-probe/ask")
    assert ask.status == resources_pb2.RUNTIME_STATUS_FAILED
    assert all("budget-probe/ask:" in r.body["messages"][-1]["content"] for r in provider.requests)
    assert_budget_used_up(provider, ask.reason)


async def test_a_stalled_function_call_is_re_sent_at_half_the_time_left_within_the_same_8(stack) -> None:
    provider, stub, session_id = stack
    provider.requests.clear()
    provider.responses.append(JsonReply(body=completion("too late"), delay_s=30))  # the first send stalls
    ask = await run_manual(stub, session_id, "budget-probe/ask")
    assert ask.status == resources_pb2.RUNTIME_STATUS_FAILED
    # The stalled send counts: 1 + 7 refusals, falling back as any call does.
    assert models(provider) == ["primary"] * 4 + ["second"] * 3 + ["third"], models(provider)
    assert "RESOURCE_EXHAUSTED" in ask.reason and "after 8 attempt(s)" in ask.reason, ask.reason
    stalled, re_sent = provider.requests[:2]
    half = ASK_TIMEOUT_S / 2
    assert half - 0.4 <= re_sent.at - stalled.at <= half + 0.2, re_sent.at - stalled.at


async def test_a_stalled_function_call_with_the_floor_or_less_left_is_sent_once(stack) -> None:
    provider, stub, session_id = stack
    provider.requests.clear()
    provider.responses.append(JsonReply(body=completion("too late"), delay_s=30))
    briefly = await run_manual(stub, session_id, "budget-probe/ask-briefly")  # timeoutMs 900, under the 1 s floor
    assert briefly.status == resources_pb2.RUNTIME_STATUS_FAILED
    assert len(provider.requests) == 1, briefly.reason
