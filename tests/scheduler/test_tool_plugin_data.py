"""What a plugin tool or service an agent calls reads of its plugin's own data, and whose prompt
segments an agent that imports services reads."""

from __future__ import annotations

from types import SimpleNamespace

from covel.store.v1 import store_pb2
from services.scheduler.agent.prompt_segments import providers
from services.scheduler.execution.plugin_data import PluginDataViews
from services.scheduler.execution.turn_shared import TurnShared
from shared.plugin_sdk.tools import ToolContext
from shared.structs import to_struct, to_value
from tests.scheduler.agent_harness import runtime


class Store:
    async def ListPluginData(self, request):  # noqa: N802 (the gRPC method's name)
        entries = [store_pb2.PluginDataEntry(namespace="blocks", key="scene", value=to_value({"value": "Inn."})),
                   store_pb2.PluginDataEntry(namespace="_hidden.x", key="k", value=to_value(1))]
        return store_pb2.ListPluginDataResponse(entries=entries)


async def test_a_run_sees_committed_then_upstream_then_its_own_writes_without_hidden_namespaces() -> None:
    run = TurnShared(history=[], packages={})
    run.proposals.append(store_pb2.Proposal(plugin_id="memory", runtime_id="memory/a", type="plugin.data",
                                            payload=to_struct({"namespace": "blocks", "key": "player", "value": {"value": "Wren."}})))
    own = [{"type": "plugin.data", "payload": {"namespace": "blocks", "key": "scene", "value": {"value": "Inn. Rain."}}},
           {"type": "plugin.data.delete", "payload": {"namespace": "blocks", "key": "player"}}]
    seen = await PluginDataViews(Store()).as_run_sees(run, "s1", "memory", own)
    assert seen == {"blocks": {"scene": {"value": "Inn. Rain."}}}
    assert await PluginDataViews(Store()).as_run_sees(run, "s1", "memory", []) == {
        "blocks": {"scene": {"value": "Inn."}, "player": {"value": "Wren."}}}


def test_a_tool_context_reads_copies_of_its_plugins_data() -> None:
    context = ToolContext(session_id="s", turn_id="t", locale="en", runtime_id="r", logical_turn=1,
                          _plugin_data={"blocks": {"scene": {"value": "Inn."}}})
    record = context.get_plugin_data("blocks", "scene")
    record["value"] = "changed"
    assert context.get_plugin_data("blocks", "scene") == {"value": "Inn."}
    assert context.get_plugin_data("blocks", "none", "?") == "?" and context.list_plugin_data("other") == {}


def test_an_agent_reads_the_segments_of_the_plugins_whose_services_it_imports() -> None:
    def package(plugin_id: str, services: list[str]):
        entries = [SimpleNamespace(contract=contract) for contract in services]
        return SimpleNamespace(id=plugin_id, extensions=("prompt.segment@1/x",),
                               definition=SimpleNamespace(contributes=SimpleNamespace(services=entries)))

    packages = [package("memory", ["memory.block-edit@1"]), package("affinity", []), package("keeper", [])]
    importer = runtime("keeper", manifest={"agent": {"tools": {"services": ["memory.block-edit@1"]}}})
    assert providers(importer, False, packages) == ["keeper", "memory"]
    assert providers(runtime("keeper"), False, packages) == ["keeper"]
