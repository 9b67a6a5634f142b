"""prompt.history-transform@1: who transforms, in which order, and what of their answers is kept."""

from __future__ import annotations

from types import SimpleNamespace

from covel.common.v1 import common_pb2
from covel.hooks.v1 import hooks_pb2
from services.scheduler.agent.history_transforms import apply_answer, providers, transform_history
from shared.structs import to_struct, to_value
from tests.scheduler.agent_harness import runtime, scope


def package(plugin_id: str, *extensions: tuple[str, int]):
    entries = [SimpleNamespace(point="prompt.history-transform@1", id=name, order=order) for name, order in extensions]
    return SimpleNamespace(id=plugin_id, definition=SimpleNamespace(contributes=SimpleNamespace(extensions=entries)))


def log() -> list[common_pb2.Message]:
    return [
        common_pb2.Message(id="p1", role="player", text="I open the gate.", seq=1, turn_id="t1"),
        common_pb2.Message(id="s1", role="story", text="The gate creaks.", seq=2, turn_id="t1"),
        common_pb2.Message(id="sum", role="summary", text="Earlier: a gate.", seq=3, metadata=to_struct({"throughSeq": 2})),
        common_pb2.Message(id="p2", role="player", text="I go in.", seq=4, turn_id="t2"),
        common_pb2.Message(id="s2", role="story", text="A yard.", seq=5, turn_id="t2"),
    ]


class Hooks:
    def __init__(self, answers):
        self.answers, self.requests = answers, []

    async def call_extension(self, scope, point, payload, *, plugin_id="", timeout_ms=0):
        self.requests.append((plugin_id, payload))
        answer = self.answers[plugin_id]
        output = answer(payload) if callable(answer) else answer
        if isinstance(output, Exception):
            return [hooks_pb2.ExtensionAnswer(plugin_id=plugin_id, id="x", ok=False, error=str(output))]
        return [hooks_pb2.ExtensionAnswer(plugin_id=plugin_id, id="x", ok=True, output=to_value(output))]


async def committed(plugin_id):
    return {("choices", "1"): {"variant": 2}, ("_hidden", "k"): 1}


def shout(payload):
    return {"messages": [{"id": m["id"], "text": m["text"].upper()} for m in payload["messages"]]}


async def test_providers_run_in_order_each_on_the_answer_before_and_a_failing_one_is_skipped():
    packages = [package("zeta", ("x", 1)), package("alpha", ("x", 5)), package("broken", ("x", 0)), SimpleNamespace(id="narrator", definition=None)]
    assert providers(runtime("narrator", "story"), True, packages) == [("broken", "x"), ("zeta", "x"), ("alpha", "x")]
    hooks = Hooks({"broken": RuntimeError("raised KeyError"), "zeta": shout,
                   "alpha": lambda p: [*p["messages"], {"role": "player", "text": "(later)"}]})
    history = await transform_history(hooks=hooks, committed=committed, scope=scope(), runtime=runtime("narrator", "story"),
                                      story=True, packages=packages, history=log())
    # The summary and what it folded stay; the live entries are shouted, then one is added.
    assert [(m.id, m.role, m.text) for m in history] == [
        ("p1", "player", "I open the gate."), ("s1", "story", "The gate creaks."), ("sum", "summary", "Earlier: a gate."),
        ("p2", "player", "I GO IN."), ("s2", "story", "A YARD."), ("", "player", "(later)")]
    assert history[-1].seq == 5
    _, request = hooks.requests[1]
    assert request["messages"] == [{"id": "p2", "seq": 4, "role": "player", "text": "I go in.", "turnId": "t2"},
                                   {"id": "s2", "seq": 5, "role": "story", "text": "A yard.", "turnId": "t2"}]
    assert request["data"] == {"choices": {"1": {"variant": 2}}}, "the provider's own data, without `_` namespaces"


async def test_a_system_runtime_reads_only_its_own_packages_transforms_and_none_leaves_the_history():
    packages = [package("affinity", ("x", 0)), package("probe", ("x", 0))]
    assert providers(runtime("probe/agent"), False, packages) == [("probe", "x")]
    hooks = Hooks({"probe": None})
    assert [m.text for m in await transform_history(hooks=hooks, committed=committed, scope=scope(), runtime=runtime("probe/agent"),
                                                    story=False, packages=packages, history=log())] == [m.text for m in log()]


async def test_an_answer_that_is_not_a_history_is_ignored():
    hooks = Hooks({"probe": {"messages": [{"id": "nobody", "role": "narrator", "text": "x"}]}})
    history = await transform_history(hooks=hooks, committed=committed, scope=scope(), runtime=runtime("probe/agent"),
                                      story=False, packages=[package("probe", ("x", 0))], history=log())
    assert [m.text for m in history] == [m.text for m in log()]


def test_apply_answer_keeps_an_entrys_role_and_drops_what_is_left_out():
    live = log()[3:]
    kept = apply_answer(live, [{"id": "s2", "role": "player", "text": "Changed."}])
    assert [(m.id, m.role, m.text, m.turn_id) for m in kept] == [("s2", "story", "Changed.", "t2")]
    assert live[1].text == "A yard.", "the originals are not touched"
