"""Subagent admission: validation, target resolution, limits and error codes (spec: 子 agent)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from covel.hooks.v1 import hooks_pb2
from services.scheduler.agent.execution import AgentExecution
from services.scheduler.execution.kernel_tools import KernelTools
from services.scheduler.execution.subagents import MAX_CONCURRENT, SubagentBudget, Subagents, subagent_limits
from services.scheduler.execution.turn_shared import TurnShared
from shared.structs import to_struct
from tests.scheduler.agent_harness import runtime, scope


def provider(runtime_id: str, contract: str = "", subagent_only: bool = True, timeout_ms: int | None = None):
    written: dict = {"schedule": {"subagentOnly": True}} if subagent_only else {}
    if contract:
        written["io"] = {"output": {"contract": contract}}
    if timeout_ms:
        written["agent"] = {"loop": {"timeoutMs": timeout_ms}}
    compiled = runtime(runtime_id, manifest=written)
    return compiled, compiled.manifest


def subagents(providers, run_provider=None, **kwargs):
    async def answer(plan):
        return {"ok": True, "output": {"brief": plan.brief}, "stopReason": "completed"}

    async def characters():
        return [{"id": "npc-mara", "name": "Mara", "description": "A guard."}]

    return Subagents(caller_plugin_id="gate", caller_runtime_id="gate/plan", providers=providers,
                     run_provider=run_provider or answer, characters=characters, remaining_s=lambda: 30.0, **kwargs)


async def test_targets_by_contract_and_same_package_runtime_id():
    agents = subagents([provider("gate/guard", "gate-actor@1"), provider("other/helper", "helper@1"),
                        provider("gate/scheduled", "x@1", subagent_only=False)])
    assert (await agents.run({"target": {"contract": "helper@1"}, "brief": "Help."}))["ok"] is True
    assert (await agents.run({"target": {"runtimeId": "gate/guard"}, "brief": "Guard."}))["output"] == {"brief": "Guard."}
    other = await agents.run({"target": {"runtimeId": "other/helper"}, "brief": "Help."})
    assert other["error"]["code"] == "not-found" and "by its contract" in other["error"]["message"]
    # A runtime that is not subagentOnly is no provider.
    assert (await agents.run({"target": {"contract": "x@1"}, "brief": "x"}))["error"]["code"] == "not-found"
    ambiguous = subagents([provider("a/one", "c@1"), provider("b/two", "c@1")])
    assert (await ambiguous.run({"target": {"contract": "c@1"}, "brief": "x"}))["error"]["code"] == "ambiguous"


@pytest.mark.parametrize("request_, fragment", [
    ({"brief": "x"}, "target"),
    ({"target": {"contract": "helper@1", "runtimeId": "gate/guard"}, "brief": "x"}, "exactly one"),
    ({"target": {"contract": "helper@1"}, "brief": ""}, "brief"),
    ({"target": {"contract": "helper@1"}, "brief": "x" * 20_001}, "20000"),
    ({"target": {"contract": "helper@1"}, "brief": "x", "data": "text"}, "JSON object"),
    ({"target": {"contract": "helper@1"}, "brief": "x", "data": {"blob": "y" * 33_000}}, "bytes"),
    ({"target": {"contract": "helper@1"}, "brief": "x", "budget": {"maxSteps": 0}}, "budget"),
    ({"target": {"contract": "helper@1"}, "brief": "x", "characterId": "npc-mara"}, "character-actor@1"),
])
async def test_invalid_requests_are_refused_without_using_the_budget(request_, fragment):
    agents = subagents([provider("other/helper", "helper@1")])
    result = await agents.run(request_)
    assert result["ok"] is False and result["error"]["code"] == "invalid-input" and fragment in result["error"]["message"]
    assert agents.budget.calls == 0


async def test_call_and_actor_limits():
    agents = subagents([provider("other/helper", "helper@1"), provider("cast/actor", "character-actor@1")],
                       budget=SubagentBudget(max_calls=3, max_actors=1))
    actor = await agents.run({"target": {"contract": "character-actor@1"}, "characterId": "npc-mara", "brief": "Answer the visitor.",
                              "instruction": "Be short."})
    assert actor["ok"] and "Mara" in actor["output"]["brief"] and "Be short." in actor["output"]["brief"]
    # The same character again takes no second actor slot; a missing one is refused before admission.
    assert (await agents.run({"target": {"contract": "character-actor@1"}, "characterId": "npc-mara", "brief": "Again."}))["ok"]
    missing = await agents.run({"target": {"contract": "character-actor@1"}, "characterId": "npc-nobody", "brief": "x"})
    assert missing["error"]["code"] == "invalid-input" and agents.budget.calls == 2
    assert (await agents.run({"target": {"contract": "helper@1"}, "brief": "third"}))["ok"]
    over = await agents.run({"target": {"contract": "helper@1"}, "brief": "fourth"})
    assert over["error"]["code"] == "unavailable" and "maxSubagentCalls" in over["error"]["message"]


async def test_at_most_eight_run_at_once_and_the_rest_are_unavailable_at_once():
    release = asyncio.Event()
    running = []

    async def slow(plan):
        running.append(plan.call_id)
        await release.wait()
        return {"ok": True, "output": {}, "stopReason": "completed"}

    agents = subagents([provider("other/helper", "helper@1")], run_provider=slow)
    calls = [asyncio.ensure_future(agents.run({"target": {"contract": "helper@1"}, "brief": str(i)})) for i in range(MAX_CONCURRENT)]
    await asyncio.sleep(0.01)
    assert len(running) == MAX_CONCURRENT
    ninth = await agents.run({"target": {"contract": "helper@1"}, "brief": "ninth"})
    assert ninth["error"]["code"] == "unavailable" and "already running" in ninth["error"]["message"]
    release.set()
    assert all(result["ok"] for result in await asyncio.gather(*calls))


async def test_timeout_is_the_tighter_of_budget_provider_and_caller():
    async def never(plan):
        await asyncio.sleep(10)

    agents = subagents([provider("other/helper", "helper@1", timeout_ms=60_000)], run_provider=never)
    result = await agents.run({"target": {"contract": "helper@1"}, "brief": "x", "budget": {"timeoutMs": 50}})
    assert result["error"]["code"] == "timeout" and result["stopReason"] == "timeout"


async def test_a_paused_provider_is_unavailable_and_calls_after_close_raise():
    agents = subagents([provider("other/helper", "helper@1")], is_paused=lambda plugin_id: plugin_id == "other")
    assert (await agents.run({"target": {"contract": "helper@1"}, "brief": "x"}))["error"]["code"] == "unavailable"
    await agents.close()
    with pytest.raises(RuntimeError):
        await agents.run({"target": {"contract": "helper@1"}, "brief": "x"})


def test_limits_come_from_the_session_settings():
    assert subagent_limits({}, "gate") == (16, 4)
    assert subagent_limits({"framework": {"maxSubagentCalls": 5, "maxActors": 0}}, "gate") == (5, 0)
    # The caller plugin's own panel value wins; a Struct number arrives as a float.
    assert subagent_limits({"framework": {"maxSubagentCalls": 5}, "gate": {"maxSubagentCalls": 2.0}}, "gate") == (2, 4)
    # Out of range (calls 0-64, actors 0-16) or not an integer: the default.
    assert subagent_limits({"gate": {"maxSubagentCalls": 65, "maxActors": 17}}, "gate") == (16, 4)
    assert subagent_limits({"gate": {"maxSubagentCalls": True, "maxActors": "3"}}, "gate") == (16, 4)


async def test_zero_calls_turns_subagents_off_and_a_shared_budget_counts_for_every_run():
    off = subagents([provider("other/helper", "helper@1")], budget=SubagentBudget(max_calls=0))
    result = await off.run({"target": {"contract": "helper@1"}, "brief": "x"})
    assert result["error"]["code"] == "unavailable" and "maxSubagentCalls" in result["error"]["message"]
    # A nested run's Subagents share the root's budget: calls made by either count for both.
    root_budget = SubagentBudget(max_calls=2)
    root = subagents([provider("other/helper", "helper@1")], budget=root_budget)
    nested = subagents([provider("other/helper", "helper@1")], budget=root_budget)
    assert (await root.run({"target": {"contract": "helper@1"}, "brief": "x"}))["ok"] is True
    assert (await nested.run({"target": {"contract": "helper@1"}, "brief": "x"}))["ok"] is True
    assert (await root.run({"target": {"contract": "helper@1"}, "brief": "x"}))["error"]["code"] == "unavailable"


async def test_an_asynchronous_pause_check_is_awaited():
    async def paused(plugin_id):
        return plugin_id == "other"

    agents = subagents([provider("other/helper", "helper@1")], is_paused=paused)
    result = await agents.run({"target": {"contract": "helper@1"}, "brief": "x"})
    assert result["error"]["code"] == "unavailable" and "paused" in result["error"]["message"] and agents.budget.calls == 0


def test_a_subagent_keeps_imported_services_write_or_read():
    async def answer(args):
        return {"ok": True, "data": {}}

    tools = KernelTools()
    tools.add("notes-upsert", "", {"type": "object"}, answer, read_only=False)
    tools.add("notes-get", "", {"type": "object"}, answer, read_only=True)
    tools.add("write-ledger", "", {"type": "object"}, answer, read_only=False, subagent_keeps=True)
    tools.restrict_to_read_only()
    assert sorted(tools.names()) == ["notes-get", "write-ledger"]


async def test_production_subagents_read_the_session_limits_and_refuse_a_paused_provider():
    paused = {"other"}

    class PausedPlugins:
        async def ListPausedPlugins(self, request, timeout=None):
            return hooks_pb2.ListPausedPluginsResponse(plugins=[hooks_pb2.PausedPlugin(plugin_id=p) for p in sorted(paused)])

    helper, _ = provider("other/helper", "helper@1")
    run = TurnShared(history=[], packages={"other": SimpleNamespace(runtimes=[helper])})
    execution = AgentExecution(SimpleNamespace(hooks=PausedPlugins()), hooks=None, plugin_data=None, history_max_turns=5)
    session_scope = scope()
    session_scope.session.plugin_settings["gate"].CopyFrom(to_struct({"maxSubagentCalls": 3, "maxActors": 1}))
    agents = execution.subagents_for(runtime("gate/plan"), session_scope, run)
    assert (agents.budget.max_calls, agents.budget.max_actors) == (3, 1)
    result = await agents.run({"target": {"contract": "helper@1"}, "brief": "x"})
    assert result["error"]["code"] == "unavailable" and "paused" in result["error"]["message"]
    # A nested run passes its root's budget on.
    assert execution.subagents_for(runtime("gate/plan"), session_scope, run, budget=agents.budget).budget is agents.budget


def _story(text: str, present: list[str]):
    from covel.common.v1 import common_pb2

    return common_pb2.Message(role="story", text=text, metadata=to_struct({"presentCharacterIds": present}))


async def test_a_character_request_sends_the_assembled_brief_within_its_limit():
    """Divergence 8 of issue 40: profile, the story the character witnessed, the brief and the instruction, at most
    40,000 characters: the oldest witnessed story goes first, then an oversized profile field."""
    from services.scheduler.execution.character_brief import MAX_ASSEMBLED_CHARS

    history = [_story("OLD " + "o" * 25_000, ["npc-mara"]), _story("Elsewhere, without her.", ["npc-tobin"]),
               _story("NEW: Mara saw the lamp go out.", ["npc-mara"])]
    agents = subagents([provider("cast/actor", "character-actor@1")], history=lambda: history)
    sent = (await agents.run({"target": {"contract": "character-actor@1"}, "characterId": "npc-mara",
                              "brief": "b" * 19_000, "instruction": "Be short."}))["output"]["brief"]
    assert len(sent) <= MAX_ASSEMBLED_CHARS and '"name": "Mara"' in sent and '"description": "A guard."' in sent
    assert "NEW: Mara saw the lamp go out." in sent and "OLD" not in sent and "without her" not in sent
    assert sent.endswith("Be short.")

    async def huge_profile():
        return [{"id": "npc-mara", "name": "Mara", "description": "d" * 30_000}]

    agents = Subagents(caller_plugin_id="gate", caller_runtime_id="gate/plan", providers=[provider("cast/actor", "character-actor@1")],
                       run_provider=lambda plan: _echo(plan), characters=huge_profile, remaining_s=lambda: 30.0)
    sent = (await agents.run({"target": {"contract": "character-actor@1"}, "characterId": "npc-mara", "brief": "b" * 19_000}))["output"]["brief"]
    assert '"name": "Mara"' in sent and "ddd" not in sent, "the oversized field is left out, the name kept"
    refused = await agents.run({"target": {"contract": "character-actor@1"}, "characterId": "npc-mara", "brief": "b" * 19_000,
                                "instruction": "i" * 25_000})
    assert refused["error"]["code"] == "invalid-input" and "40000" in refused["error"]["message"]


async def _echo(plan):
    return {"ok": True, "output": {"brief": plan.brief}, "stopReason": "completed"}


async def test_the_budget_a_suspension_keeps_goes_on_after_the_resume() -> None:
    """Spec (执行名额): a suspension saves {limits, calls, actorIds}; the resumed run goes on with them."""
    from services.scheduler.agent.execution import _budget_of
    from services.scheduler.agent.loop_state import ExecutionProgress
    from services.scheduler.agent.suspension import saved_state
    from services.scheduler.execution.kernel_tools import KernelTools
    from services.scheduler.execution.outcome import Resume

    agents = subagents([provider("other/helper", "helper@1")], budget=SubagentBudget(max_calls=2, max_actors=1))
    assert (await agents.run({"target": {"contract": "helper@1"}, "brief": "first"}))["ok"]
    tools = KernelTools(subagent_budget=agents.budget)
    state = saved_state(ExecutionProgress([], 0.0, 0.0, 5, 1, 1), "system", tools, {})
    assert state["subagentBudget"] == {"limits": {"maxSubagentCalls": 2, "maxActors": 1}, "calls": 1, "actorIds": []}
    restored = _budget_of(None, Resume(state, {"ok": True}))
    assert restored is not None and (restored.max_calls, restored.calls) == (2, 1)
    resumed = subagents([provider("other/helper", "helper@1")], budget=restored)
    assert (await resumed.run({"target": {"contract": "helper@1"}, "brief": "second"}))["ok"]
    over = await resumed.run({"target": {"contract": "helper@1"}, "brief": "third"})
    assert over["error"]["code"] == "unavailable", "the calls before the suspension still count"
    assert _budget_of(None, Resume({}, {})) is None, "a suspension that kept no budget: a new one"
