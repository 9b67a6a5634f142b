"""PluginAgentHooks, AgentPlugins and AgentComponents (shared/plugin_sdk/agent_plugins.py): code written
against the spec's types drives an agent in process with the hookspec rules."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from shared.plugin_sdk.agent_events import (
    EventBus,
    LLMCallFinished,
    LLMCallStarted,
    MessagesPending,
    StepFinished,
    SystemPrompt,
    ToolCallFinished,
    ToolCallStarted,
)
from shared.plugin_sdk.agent_plugins import AgentComponents, AgentPlugins, PluginAgentHooks, hook_runtime
from shared.plugin_sdk.hookspecs import (
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    StreamState,
    Tool,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
    hookimpl,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")
SEEN: list = []


class Tape:
    name = "s-1"

    def entries(self):
        return [{"role": "user", "content": "hi"}]


class Inbox:
    def __init__(self):
        self.waiting = {"s-1": [{"content": "and the lamp?"}]}

    def drain(self, session_id):
        return self.waiting.pop(session_id, [])


class Store:
    def list_tapes(self):
        return []

    def read(self, tape):
        return None

    def append(self, tape, entry):
        SEEN.append(("append", tape))


class Policy:
    @hookimpl
    def before_llm_call(self, request, state):
        if request.messages[-1]["content"] == "(pause)":
            return LLMCallDecision.finish("You wait.")
        if request.messages[-1]["content"] == "garbage":
            return 42
        return LLMCallRequest(run_id=request.run_id, model="fast", messages=request.messages)

    @hookimpl(tryfirst=True)
    def before_tool_call(self, call, state):
        SEEN.append(("policy", call.tool, dict(call.arguments)))
        if call.tool == "roll":
            return ToolCallDecision.proceed({"sides": min(call.arguments["sides"], 20)})
        if call.tool == "delete-save":
            return ToolCallDecision.deny("not in this story")
        if call.tool == "explodes":
            raise RuntimeError("policy bug")

    @hookimpl
    def after_tool_call(self, call, result, state):
        SEEN.append(("after_tool", call.tool, result.result))

    @hookimpl
    def after_llm_call(self, request, result, state):
        SEEN.append(("after_llm", result.text))

    @hookimpl
    def continue_prompt(self, prompt, tape, state):
        return f"Go on from {len(tape.entries())} entries (step {state.step})."

    @hookimpl
    def system_prompt(self, prompt, state):
        return "Keep it short."

    @hookimpl
    def provide_tools(self):
        return [Tool("look", lambda ctx, args: {"seen": "a lamp"})]

    @hookimpl
    def provide_steering_inbox(self):
        return Inbox()

    @hookimpl
    def load_state(self, message, session_id):
        return {"mood": "calm", "who": "policy"}


class Cache:
    @hookimpl
    def before_tool_call(self, call, state):
        SEEN.append(("cache", call.tool, dict(call.arguments)))
        if call.tool == "roll":
            return ToolCallDecision.replace({"rolled": call.arguments["sides"]})

    @hookimpl
    def provide_tape_store(self):
        return Store()

    @hookimpl
    def provide_tape_sidecar(self):
        return Store()

    @hookimpl
    def load_state(self, message, session_id):
        return {"who": "cache", "said": message["content"]}

    @hookimpl
    def provide_lifespan(self):
        SEEN.append("cache up")
        yield
        SEEN.append("cache down")


class Timer:
    @hookimpl
    def provide_lifespan(self):
        @contextmanager
        def span():
            SEEN.append("timer up")
            yield
            SEEN.append("timer down")
        return span()


@dataclass
class Agent:
    tools: list = field(default_factory=list)
    events: EventBus | None = None


@pytest.fixture(autouse=True)
def clear_seen():
    SEEN.clear()


async def test_the_interception_hooks_decide_as_specified() -> None:
    raised = []

    async def on_raised(hook, error):
        raised.append((hook, str(error)))

    hooks = PluginAgentHooks(hook_runtime([Policy(), Cache()]), on_raised=on_raised)
    request = LLMCallRequest("t:r", "story", [{"role": "user", "content": "(pause)"}])
    assert await hooks.before_llm_call(request, {}) == (request, LLMCallDecision.finish("You wait."))
    rewritten, decision = await hooks.before_llm_call(LLMCallRequest("t:r", "story", [{"role": "user", "content": "go"}]), {})
    assert rewritten.model == "fast" and decision is None
    garbage = LLMCallRequest("t:r", "story", [{"role": "user", "content": "garbage"}])
    assert await hooks.before_llm_call(garbage, {}) == (garbage, None), "a wrong type is skipped"
    # tryfirst: Policy clamps, then Cache (registered later) replaces with what it sees.
    call, decision = await hooks.before_tool_call(ToolCall("t:r", "roll", {"sides": 100}), {})
    assert decision == ToolCallDecision.replace({"rolled": 20}) and call.arguments == {"sides": 20}
    assert [entry[0] for entry in SEEN] == ["policy", "cache"]
    assert (await hooks.before_tool_call(ToolCall("t:r", "delete-save", {}), {}))[1] == ToolCallDecision.deny("not in this story")
    call, decision = await hooks.before_tool_call(ToolCall("t:r", "explodes", {"a": 1}), {})
    assert decision == ToolCallDecision.proceed({"a": 1}) and raised == [("before_tool_call", "policy bug")]


async def test_subscribe_puts_them_on_the_bus() -> None:
    bus = PluginAgentHooks(hook_runtime([Policy()])).subscribe()
    started = await bus.emit(LLMCallStarted(LLMCallRequest("t:r", "story", [{"role": "user", "content": "(pause)"}]), {}))
    assert started.decision == LLMCallDecision.finish("You wait.")
    tool = await bus.emit(ToolCallStarted(ToolCall("t:r", "roll", {"sides": 100}), {}))
    assert tool.call.arguments == {"sides": 20} and tool.decision == ToolCallDecision.proceed({"sides": 20})
    await bus.emit(LLMCallFinished(started.request, LLMCallResult("t:r", text="You wait."), {}))
    await bus.emit(ToolCallFinished(tool.call, ToolCallResult("t:r", "roll", {"sides": 20}, result=7), {}))
    assert ("after_llm", "You wait.") in SEEN and ("after_tool", "roll", 7) in SEEN


async def test_agent_plugins_run_lifespans_give_components_attach_and_build_state() -> None:
    plugins = AgentPlugins(plugins=[Policy(), Cache(), Timer()])
    async with plugins.running():
        assert SEEN == ["timer up", "cache up"], "hook order: the last registered first"
    assert SEEN[2:] == ["cache down", "timer down"]
    components: AgentComponents = plugins.components()
    assert isinstance(components["store"], Store) and len(components["sidecars"]) == 1 and "context" not in components

    agent = plugins.attach(Agent())
    assert [tool.name for tool in agent.tools] == ["look"] and agent.events is not None
    step = await agent.events.emit(StepFinished("hi", Tape(), StreamState("s-1", "t:r", step=2)))
    assert step.next_prompt == "Go on from 1 entries (step 2)."
    done = await agent.events.emit(StepFinished("hi", Tape(), StreamState("s-1", "t:r", step=3, status="done"), status="done"))
    assert done.next_prompt is None, "only a step that continues"
    pending = await agent.events.emit(MessagesPending("s-1"))
    assert pending.messages == [{"content": "and the lamp?"}]
    prompt = await agent.events.emit(SystemPrompt("hi", {}))
    assert prompt.parts == ["Keep it short."]
    assert await plugins.build_state("s-1", message={"content": "hello"}) == {
        "mood": "calm", "who": "cache", "said": "hello", "session_id": "s-1"}


async def test_wrappers_are_refused() -> None:
    class Timing:
        @hookimpl(wrapper=True)
        def before_tool_call(self, call, state):
            return (yield)

    with pytest.raises(ValueError, match="Timing.*before_tool_call: pluggy wrappers are not supported"):
        AgentPlugins(plugins=[Timing()])
