"""agent.reasoning and thinking models through the real gateway and a fake OpenAI-compatible server: a switchable
provider is sent its thinking_off fields when a call turns thinking off; while a model thinks, a forced tool choice
goes as auto; a provider that does not think gets requests as asked; a bad thinking setting stops the gateway."""

from __future__ import annotations

import pytest

from covel.gateway.v1 import gateway_pb2
from services.gateway.settings import GatewaySettings
from services.gateway.slots import SlotConfigError, SlotTable
from shared.structs import to_struct
from tests.gateway.conftest import running_gateway, user
from tests.gateway.fake_openai import FakeOpenAI

TOOL = gateway_pb2.ToolDefinition(name="save", parameters=to_struct({"type": "object", "properties": {}}))


def request(**extra) -> gateway_pb2.GenerateRequest:
    return gateway_pb2.GenerateRequest(slot="plugin", messages=[user("extract")], tools=[TOOL], **extra)


def settings(fake: FakeOpenAI, monkeypatch, **extra):
    monkeypatch.setenv("COVEL_TEST_THINKING_KEY", "sk-test")
    return {"gateway_openai_base_url": fake.base_url, "gateway_openai_model": "m", "gateway_openai_api_key_env": "COVEL_TEST_THINKING_KEY",
            **extra}


async def bodies(fake: FakeOpenAI, monkeypatch, requests: list[gateway_pb2.GenerateRequest], **extra) -> list[dict]:
    async with running_gateway(**settings(fake, monkeypatch, **extra)) as gateway:
        for sent in requests:
            await gateway.GenerateOnce(sent)
    return [r.body for r in fake.requests]


async def test_a_switchable_model_thinks_unless_the_call_turns_it_off(fake_openai: FakeOpenAI, monkeypatch) -> None:
    off, thinking, named = await bodies(fake_openai, monkeypatch, [
        request(tool_choice="required", reasoning=False), request(tool_choice="required"), request(tool_choice="save", reasoning=True)],
        gateway_openai_thinking="switchable")
    assert (off["reasoning_effort"], off["tool_choice"]) == ("minimal", "required"), "thinking off: the forced choice stays"
    assert "reasoning_effort" not in thinking and thinking["tool_choice"] == "auto", "thinking: no forced choice"
    assert "reasoning_effort" not in named and named["tool_choice"] == "auto"


async def test_a_provider_own_off_switch_and_models_that_always_think(fake_openai: FakeOpenAI, monkeypatch) -> None:
    [off] = await bodies(fake_openai, monkeypatch, [request(tool_choice="save", reasoning=False)],
                         gateway_openai_thinking="switchable", gateway_openai_thinking_off={"enable_thinking": False})
    assert off["enable_thinking"] is False and off["tool_choice"] == {"type": "function", "function": {"name": "save"}}
    fake_openai.requests.clear()
    [always] = await bodies(fake_openai, monkeypatch, [request(tool_choice="required", reasoning=False)], gateway_openai_thinking="always")
    assert always["tool_choice"] == "auto" and "reasoning_effort" not in always, "it cannot be turned off"


async def test_a_model_that_does_not_think_gets_the_request_as_asked(fake_openai: FakeOpenAI, monkeypatch) -> None:
    [plain] = await bodies(fake_openai, monkeypatch, [request(tool_choice="required", reasoning=False)])
    assert plain["tool_choice"] == "required" and "reasoning_effort" not in plain


@pytest.mark.parametrize(("mode", "off", "message"), [
    ("sometimes", None, "thinking must be one of always, switchable"),
    ("always", {"reasoning_effort": "low"}, "only with thinking: switchable"),
])
def test_a_bad_thinking_setting_is_refused_at_startup(mode, off, message) -> None:
    with pytest.raises(SlotConfigError, match=message):
        SlotTable.from_settings(GatewaySettings(gateway_openai_model="m", gateway_openai_thinking=mode, gateway_openai_thinking_off=off))
