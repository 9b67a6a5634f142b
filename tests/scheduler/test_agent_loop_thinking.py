"""agent.reasoning reaches the gateway on every model call of the runtime (GenerateRequest.reasoning)."""

from __future__ import annotations

from services.scheduler.agent.loop import run_agent
from tests.scheduler.agent_harness import FakeGateway, FakeHooks, no_stream, reply, runtime, scope


async def test_agent_reasoning_is_sent_with_each_call() -> None:
    for written, sent in (({"reasoning": False}, False), ({}, True)):
        gateway = FakeGateway([reply('{"ok": true}')])
        await run_agent(runtime=runtime(manifest={"agent": written}), scope=scope(), history=[], player_message="Look.", gateway=gateway,
                        hooks=FakeHooks(), on_narrative=no_stream, history_max_turns=5)
        [request] = gateway.requests
        assert request.HasField("reasoning") and request.reasoning is sent
