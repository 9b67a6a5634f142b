"""prompt.segment@1: who is asked, what they are handed, and what of their answers is kept."""

from __future__ import annotations

from covel.hooks.v1 import hooks_pb2
from covel.registry.v1 import registry_pb2
from services.scheduler.agent.prompt_segments import dynamic_segments
from shared.structs import to_value
from tests.scheduler.agent_harness import runtime, scope


async def committed(plugin_id):
    """A plugin's committed data, as PluginDataViews.committed answers it."""
    if plugin_id != "affinity":
        return {}
    return {("scores", "mira"): {"name": "Mira", "score": 70}, ("_hidden.notes", "x"): "secret"}


class Hooks:
    def __init__(self, answers):
        self.answers, self.requests = answers, []

    async def call_extension(self, scope, point, payload, *, plugin_id="", timeout_ms=0):
        self.requests.append((point, plugin_id, payload))
        return [hooks_pb2.ExtensionAnswer(plugin_id=plugin_id, id="standing", ok=ok, output=to_value(output), error=error)
                for ok, output, error in self.answers.get(plugin_id, [])]


def packages():
    return [registry_pb2.PluginPackage(id="affinity", extensions=["prompt.segment@1/standing"]),
            registry_pb2.PluginPackage(id="broken", extensions=["prompt.segment@1/x"]),
            registry_pb2.PluginPackage(id="narrator")]


async def test_a_story_reads_every_providers_segments_with_their_own_data():
    hooks = Hooks({"affinity": [(True, {"id": "standing", "content": "Mira: 70", "position": {"depth": 1}}, "")],
                   "broken": [(False, None, "raised KeyError"), (True, [{"content": ""}, "junk"], "")]})
    segments = await dynamic_segments(hooks=hooks, committed=committed, scope=scope(("affinity", "broken", "narrator")),
                                      runtime=runtime("narrator", "story"), story=True, packages=packages(), player_message="Hi")
    assert segments == [{"id": "standing", "content": "Mira: 70", "position": {"depth": 1}, "pluginId": "affinity"}]
    point, plugin_id, request = hooks.requests[0]
    assert (point, plugin_id) == ("prompt.segment@1", "affinity")
    # The provider gets its own data, without the kernel's `_` namespaces.
    assert request["data"] == {"scores": {"mira": {"name": "Mira", "score": 70}}} and request["playerMessage"] == "Hi"


async def test_a_system_runtime_reads_only_its_own_packages_segments():
    hooks = Hooks({})
    await dynamic_segments(hooks=hooks, committed=committed, scope=scope(), runtime=runtime("narrator/helper"), story=False,
                           packages=packages(), player_message="")
    assert hooks.requests == []
