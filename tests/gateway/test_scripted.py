"""The gateway with the offline scripted provider, over a real gRPC channel."""

from __future__ import annotations

import json
import textwrap

import grpc
import jsonschema
import pytest

from covel.gateway.v1 import gateway_pb2
from services.scheduler.contracts import kernel_contract_schema
from shared.errors import field_violations
from shared.structs import to_struct
from tests.gateway.conftest import collect, running_gateway, user

STORY = kernel_contract_schema("narrative-engine@2")
ROLL = {
    "type": "object",
    "required": ["sides", "reason"],
    "additionalProperties": False,
    "properties": {"sides": {"type": "integer", "enum": [4, 6, 20]}, "reason": {"type": "string", "maxLength": 30}},
}


def story_request(text: str, **extra) -> gateway_pb2.GenerateRequest:
    return gateway_pb2.GenerateRequest(
        slot="story",
        messages=[gateway_pb2.ChatMessage(role="system", content="You are the narrator."), user(text)],
        response_format=gateway_pb2.ResponseFormat(name="narrative-engine@2", schema=to_struct(STORY)),
        **extra,
    )


async def test_story_reply_is_a_valid_pleasant_narrative_engine_reply() -> None:
    async with running_gateway() as gateway:
        reply = await gateway.GenerateOnce(story_request("I open the creaking door"))
    story = json.loads(reply.message.content)
    jsonschema.validate(story, STORY)
    assert 2 <= len(story["segments"]) <= 4
    assert story["yield"] == "user"
    assert any(s["kind"] == "dialogue" and s.get("speaker") for s in story["segments"])
    assert "open the creaking door" in story["segments"][0]["text"]
    assert reply.finish_reason == gateway_pb2.FINISH_REASON_STOP
    assert (reply.provider, reply.model, reply.attempts) == ("scripted", "scripted", 1)
    assert reply.usage.completion_tokens > 0 and reply.usage.total_tokens > reply.usage.completion_tokens


async def test_story_schema_is_recognised_by_its_id_too() -> None:
    request = story_request("look around")
    request.response_format.name = "whatever"
    async with running_gateway() as gateway:
        reply = await gateway.GenerateOnce(request)
    story = json.loads(reply.message.content)
    jsonschema.validate(story, STORY)
    assert "look around" in story["segments"][0]["text"]


async def test_same_request_same_reply_and_conversations_vary() -> None:
    async with running_gateway() as gateway:
        first = await gateway.GenerateOnce(story_request("I climb the tower"))
        again = await gateway.GenerateOnce(story_request("I climb the tower"))
        replies = {(await gateway.GenerateOnce(story_request(f"I knock {n} times"))).message.content for n in range(6)}
    assert first.message.content == again.message.content
    assert len(replies) == 6
    # Not only the echoed action differs: several templates are in use.
    speakers = {json.loads(r)["segments"][-1].get("speaker") for r in replies}
    assert len(speakers) > 1


async def test_any_schema_gets_a_valid_instance() -> None:
    schema = {
        "$defs": {"item": {"type": "object", "required": ["id", "qty"], "properties": {"id": {"type": "string", "minLength": 2}, "qty": {"type": "integer", "minimum": 1, "maximum": 9}}}},
        "type": "object",
        "required": ["items", "status"],
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1, "maxItems": 4}, "status": {"enum": ["open", "closed"]}},
    }
    request = gateway_pb2.GenerateRequest(
        slot="plugin", messages=[user("extract")], response_format=gateway_pb2.ResponseFormat(name="order", schema=to_struct(schema))
    )
    async with running_gateway() as gateway:
        reply = await gateway.GenerateOnce(request)
    jsonschema.validate(json.loads(reply.message.content), schema)


async def test_plain_text_without_a_schema() -> None:
    async with running_gateway() as gateway:
        reply = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user("I wave")]))
    assert "wave" in reply.message.content
    assert not reply.message.content.startswith("{")


async def test_streamed_deltas_concatenate_to_the_final_content() -> None:
    async with running_gateway() as gateway:
        deltas, final = await collect(gateway.Generate(story_request("I light the lantern")))
        once = await gateway.GenerateOnce(story_request("I light the lantern"))
    texts = [d.content_delta for d in deltas]
    # All ready at once: one message (tests/gateway/test_coalesced_stream.py).
    assert len(texts) == 1
    assert "".join(texts) == final.message.content == once.message.content
    jsonschema.validate(json.loads(final.message.content), STORY)


@pytest.mark.parametrize("choice", ["required", "roll_dice"])
async def test_required_tool_call_has_valid_arguments(choice: str) -> None:
    request = gateway_pb2.GenerateRequest(
        slot="plugin",
        messages=[user("roll for it")],
        tools=[
            gateway_pb2.ToolDefinition(name="roll_dice", description="Roll a die", parameters=to_struct(ROLL)),
            gateway_pb2.ToolDefinition(name="other", parameters=to_struct({"type": "object"})),
        ],
        tool_choice=choice,
    )
    async with running_gateway() as gateway:
        reply = await gateway.GenerateOnce(request)
        deltas, final = await collect(gateway.Generate(request))
    assert reply.finish_reason == gateway_pb2.FINISH_REASON_TOOL_CALLS
    (call,) = reply.message.tool_calls
    assert call.name == "roll_dice" and call.id
    jsonschema.validate(json.loads(call.arguments), ROLL)
    streamed = [d.tool_call_delta for d in deltas]
    assert streamed[0].name == "roll_dice" and streamed[0].id == call.id
    assert "".join(d.arguments for d in streamed) == call.arguments == final.message.tool_calls[0].arguments


async def test_chunk_delay_setting_spaces_the_deltas() -> None:
    import time

    async with running_gateway(gateway_scripted_chunk_delay_ms=20) as gateway:
        started = time.monotonic()
        deltas, _ = await collect(gateway.Generate(gateway_pb2.GenerateRequest(slot="story", messages=[user("hi")])))
    assert time.monotonic() - started >= 0.02 * len(deltas) * 0.9


async def test_script_queue_rules_and_fallback_to_automatic(tmp_path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(
        textwrap.dedent(
            """
            queues:
              story:
                - text: "First canned reply."
                - text: "And then the"
                  finish_reason: length
                - tool_calls: [{name: roll_dice, arguments: {sides: 6, reason: luck}}]
              plugin:
                - error: {status: 503, message: overloaded}
                - json: {ok: true}
            rules:
              - match: "SECRET word"
                slots: [story]
                reply: {text: "You said the secret word."}
            """
        )
    )
    async with running_gateway(gateway_script=script) as gateway:
        first = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user("go")]))
        ruled = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user("the secret word!")]))
        deltas, second = await collect(gateway.Generate(gateway_pb2.GenerateRequest(slot="story", messages=[user("go")])))
        tool = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user("go")]))
        automatic = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user("I sit down")]))
        retried = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="plugin", messages=[user("x")]))
        ruled_other_slot = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="memory", messages=[user("secret word")]))
    assert first.message.content == "First canned reply."
    assert ruled.message.content == "You said the secret word."
    assert second.message.content == "And then the" == "".join(d.content_delta for d in deltas)
    assert second.finish_reason == gateway_pb2.FINISH_REASON_LENGTH
    assert tool.finish_reason == gateway_pb2.FINISH_REASON_TOOL_CALLS
    assert json.loads(tool.message.tool_calls[0].arguments) == {"sides": 6, "reason": "luck"}
    assert "sit down" in automatic.message.content
    assert json.loads(retried.message.content) == {"ok": True} and retried.attempts == 2
    assert ruled_other_slot.message.content != "You said the secret word."


async def test_list_slots_with_the_embedded_default() -> None:
    async with running_gateway() as gateway:
        reply = await gateway.ListSlots(gateway_pb2.ListSlotsRequest())
    slots = {s.slot: s for s in reply.slots}
    assert {"default", "story", "plugin", "memory", "fast"} <= set(slots)
    assert all(s.provider == "scripted" for s in reply.slots)


async def test_list_slots_from_yaml_never_shows_a_key(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("COVEL_TEST_GATEWAY_KEY", "sk-very-secret-123")
    secret = tmp_path / "key"
    secret.write_text("sk-from-file-456\n")
    config = tmp_path / "gateway.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            providers:
              cloud:
                base_url: https://llm.example.com/v1
                api_key_env: COVEL_TEST_GATEWAY_KEY
              mounted:
                base_url: https://other.example.com/v1
                api_key_file: {secret}
              nokey:
                base_url: http://127.0.0.1:9/v1
                api_key_env: COVEL_TEST_GATEWAY_MISSING
            slots:
              story: {{provider: cloud, model: big, fallbacks: [small, "mounted:m2"]}}
              memory: mounted:m1
              fast: nokey:tiny
              plugin: scripted
            """
        )
    )
    async with running_gateway(gateway_config=config) as gateway:
        reply = await gateway.ListSlots(gateway_pb2.ListSlotsRequest())
    slots = {s.slot: s for s in reply.slots}
    assert set(slots) == {"story", "memory", "fast", "plugin"}
    story = slots["story"]
    assert (story.provider, story.model, story.base_url) == ("cloud", "big", "https://llm.example.com/v1")
    assert list(story.fallbacks) == ["cloud:small", "mounted:m2"]
    assert story.credentials_present and slots["memory"].credentials_present
    assert not slots["fast"].credentials_present
    assert story.source == f"yaml:{config}"
    assert "secret" not in str(reply) and "sk-" not in str(reply)


async def test_unknown_slot_without_default_is_failed_precondition(tmp_path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("slots:\n  story: scripted\n")
    async with running_gateway(gateway_config=config) as gateway:
        ok = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user("hi")]))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="memory", messages=[user("hi")]))
        with pytest.raises(grpc.aio.AioRpcError) as streamed:
            await collect(gateway.Generate(gateway_pb2.GenerateRequest(slot="memory", messages=[user("hi")])))
    assert ok.provider == "scripted"
    for error in (caught.value, streamed.value):
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "'memory'" in error.details() and str(config) in error.details()
        assert "COVEL_GATEWAY_SLOTS" in error.details()


async def test_model_override_wins_over_slot(tmp_path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("slots:\n  story: {provider: scripted, model: storyteller}\n  fast: {provider: scripted, model: quick}\n")
    async with running_gateway(gateway_config=config) as gateway:
        by_slot = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", messages=[user("hi")]))
        by_name = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", model_override="fast", messages=[user("hi")]))
        direct = await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", model_override="scripted:other", messages=[user("hi")]))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(gateway_pb2.GenerateRequest(slot="story", model_override="nowhere:x", messages=[user("hi")]))
    assert (by_slot.model, by_name.model, direct.model) == ("storyteller", "quick", "other")
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "nowhere:x" in caught.value.details()


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (gateway_pb2.GenerateRequest(slot="story"), "messages"),
        (gateway_pb2.GenerateRequest(slot="story", messages=[user("a"), gateway_pb2.ChatMessage(role="narrator", content="b")]), "messages[1].role"),
        (gateway_pb2.GenerateRequest(slot="story", messages=[gateway_pb2.ChatMessage(role="tool", content="b")]), "messages[0].tool_call_id"),
        (gateway_pb2.GenerateRequest(slot="story", messages=[user("a")], tool_choice="missing"), "tool_choice"),
    ],
)
async def test_invalid_requests_name_the_field(request_: gateway_pb2.GenerateRequest, field: str) -> None:
    async with running_gateway() as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as once:
            await gateway.GenerateOnce(request_)
        with pytest.raises(grpc.aio.AioRpcError) as streamed:
            await collect(gateway.Generate(request_))
    for error in (once.value, streamed.value):
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == [field]
