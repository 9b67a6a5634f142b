"""The turn hooks the hooks service calls (services/hooks/plugin_side/turn_hooks.py): run_model on PreLLMCall,
build_prompt on PostContextAssembly, loaded from a real entry module and run by the real dispatcher."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from services.hooks.plugin_side.model_streams import OPEN_STREAMS

pytestmark = pytest.mark.asyncio(loop_scope="session")

TURNS = '''
from shared.plugin_sdk.hookspecs import LLMCallDecision, hookimpl


class Early:
    """Registered first: called last."""

    @hookimpl
    def run_model(self, prompt, session_id, state):
        return "from early: " + prompt[-1]["content"]

    @hookimpl
    def build_prompt(self, message, session_id, state):
        return "plain " + message["content"]


class Late:
    @hookimpl
    def before_llm_call(self, request, state):
        if request.messages[-1]["content"] == "finish":
            return LLMCallDecision.finish("finished")

    @hookimpl
    def run_model(self, prompt, session_id, state):
        said = prompt[-1]["content"]
        if said == "raise":
            raise RuntimeError("model bug")
        if said == "wrong":
            return 42
        if said == "late":
            return "from late"
        return None

    @hookimpl
    def build_prompt(self, message, session_id, state):
        if message["content"] == "parts":
            return [{"type": "text", "text": "one"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "two"}]
        if message["content"] == "wrong":
            return {"no": "dict"}
        return None


def register(covel):
    covel.register_hookimpls(Early())
    covel.register_hookimpls(Late())
'''
EVENTS = ("PreLLMCall", "PostLLMResponse", "PostContextAssembly")
EXECUTION = ExecutionContext(session_id="s", turn_id="t1", locale="en", active_plugin_ids=("turns",),
                             plugin_id="turns", runtime_id="narrator")


@pytest.fixture
def table(tmp_path: Path) -> HandlerTable:
    (tmp_path / "turns" / "server").mkdir(parents=True)
    (tmp_path / "turns" / "server" / "index.py").write_text(TURNS)
    entry = PluginEntry("turns", tmp_path / "turns", "server/index.py", tuple((event, "normal") for event in EVENTS), "builtin")
    result = load_entries([entry], generation=1)
    assert result.errors == {}
    return HandlerTable(result.loaded[0].registrar.hooks, {"turns": "builtin"})


def call(said: str) -> dict:
    return {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": said}], "model": "story",
            "tools": [], "stream": True}


@pytest.mark.parametrize(("said", "answer"), [("late", "from late"), ("other", "from early: other"), ("raise", "from early: raise"),
                                              ("wrong", "from early: wrong"), ("finish", "finished")])
async def test_run_model_answers_the_call_first_text_wins_and_finish_comes_first(table, said, answer) -> None:
    pre = await dispatch(table, "PreLLMCall", EXECUTION, call(said))
    assert pre.payload["response"] == {"content": answer}


def assembled(said: str) -> dict:
    return {"systemPrompt": "sys", "messages": [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"},
                                                {"role": "user", "content": said}]}


@pytest.mark.parametrize(("said", "prompt"), [("parts", "one\ntwo"), ("hello", "plain hello"), ("wrong", "plain wrong")])
async def test_build_prompt_replaces_the_last_user_message(table, said, prompt) -> None:
    result = await dispatch(table, "PostContextAssembly", EXECUTION, assembled(said))
    assert result.payload["messages"][:2] == assembled(said)["messages"][:2]
    assert result.payload["messages"][-1] == {"role": "user", "content": prompt}
    assert result.payload["systemPrompt"] == "sys"


AROUND = '''
from shared.plugin_sdk.hookspecs import hookimpl

SEEN = []


class Around:
    @hookimpl
    def load_state(self, message, session_id):
        if message["content"] == "raise":
            raise RuntimeError("state bug")
        return {"mood": "calm", "heard": message["content"]}

    @hookimpl
    def system_prompt(self, prompt, state):
        SEEN.append(("system_prompt", state.get("mood")))

    @hookimpl
    def save_state(self, session_id, state, message, model_output):
        SEEN.append(("save_state", state.get("mood"), state["sent"], message["content"], model_output))

    @hookimpl
    def render_outbound(self, message, session_id, state, model_output):
        return [{"content": model_output}, {"content": "second"}] if model_output != "wrong" else "not a list"

    @hookimpl
    def dispatch_outbound(self, message):
        SEEN.append(("first dispatcher", message["content"]))
        return message["content"] == "second"


class Later:
    @hookimpl
    def dispatch_outbound(self, message):
        SEEN.append(("later dispatcher", message["content"]))
        return 1


def register(covel):
    covel.register_hookimpls(Around())
    covel.register_hookimpls(Later())
'''


@pytest.fixture
def around(tmp_path: Path):
    (tmp_path / "around" / "server").mkdir(parents=True)
    (tmp_path / "around" / "server" / "index.py").write_text(AROUND)
    entry = PluginEntry("around", tmp_path / "around", "server/index.py",
                        (("TurnStart", "normal"), ("PostContextAssembly", "normal")), "builtin")
    result = load_entries([entry], generation=1)
    assert result.errors == {}
    [loaded] = result.loaded
    module = __import__("sys").modules["covel_plugin_around_g1.server.index"]
    module.SEEN.clear()
    return HandlerTable(loaded.registrar.hooks, {"around": "builtin"}), loaded, module.SEEN


async def test_load_state_reaches_the_turns_hooks_and_save_state_and_outbound_follow_message_sent(around) -> None:
    from shared.plugin_sdk.event_keys import InternalEvent

    table, loaded, seen = around
    turn = ExecutionContext(session_id="s", turn_id="t1", locale="en", active_plugin_ids=("around",))
    start = await dispatch(table, "TurnStart", turn, {"playerMessage": "I knock.", "actions": []})
    assert not start.aborted
    execution = ExecutionContext(session_id="s", turn_id="t1", locale="en", active_plugin_ids=("around",),
                                 plugin_id="around", runtime_id="narrator")
    await dispatch(table, "PostContextAssembly", execution, {"systemPrompt": "", "messages": []})
    [handler] = loaded.registrar.event_handlers
    assert handler.key == "message:sent"
    await handler.handler(InternalEvent("message:sent", "s", {"to": "s", "content": "The door opens.", "success": True}))
    # Later (registered last) is asked first: 1 is not a bool (logged), so Around's is asked too.
    assert seen == [("system_prompt", "calm"), ("save_state", "calm", True, "I knock.", "The door opens."),
                    ("later dispatcher", "The door opens."), ("first dispatcher", "The door opens."),
                    ("later dispatcher", "second"), ("first dispatcher", "second")]


async def test_a_raising_load_state_never_blocks_the_turn_and_a_wrong_render_is_skipped(around) -> None:
    from shared.plugin_sdk.event_keys import InternalEvent

    table, loaded, seen = around
    turn = ExecutionContext(session_id="s2", turn_id="t2", locale="en", active_plugin_ids=("around",))
    start = await dispatch(table, "TurnStart", turn, {"playerMessage": "raise", "actions": []})
    assert not start.aborted and start.trace[0].status == "ok"
    [handler] = loaded.registrar.event_handlers
    await handler.handler(InternalEvent("message:sent", "s2", {"to": "s2", "content": "wrong", "success": False}))
    assert seen == [("save_state", None, False, "raise", "wrong")], "no state, nothing dispatched"


MODELS = '''
from shared.plugin_sdk.hookspecs import ModelOptions, StreamEvent, hookimpl


class Streams:
    @hookimpl
    def run_model_stream(self, prompt, session_id, state):
        said = prompt[-1]["content"]
        if said == "pieces":
            return iter(["a", "b", "c"])
        if said == "final":
            return iter([StreamEvent("text", "draft"), StreamEvent("final", "whole")])
        if said == "broken":
            def gen():
                yield "x"
                raise RuntimeError("stream bug")
            return gen()
        if said == "wrong":
            return 42
        return None

    @hookimpl
    async def provide_model_options(self, session_id, workspace):
        return {"s-slot": ModelOptions(slot="fast"), "s-model": ModelOptions(model="openai:gpt-4o", temperature=0.2),
                "s-wrong": ModelOptions()}.get(session_id)


class Async:
    @hookimpl
    def run_model_stream(self, prompt, session_id, state):
        if prompt[-1]["content"] != "async":
            return None

        async def events():
            for piece in ("as", "ync"):
                yield StreamEvent("text", piece)
        return events()


def register(covel):
    covel.register_hookimpls(Streams())
    covel.register_hookimpls(Async())
'''


@pytest.fixture
def models(tmp_path: Path) -> HandlerTable:
    (tmp_path / "models" / "server").mkdir(parents=True)
    (tmp_path / "models" / "server" / "index.py").write_text(MODELS)
    entry = PluginEntry("models", tmp_path / "models", "server/index.py", (("PreLLMCall", "normal"), ("PostLLMResponse", "normal")), "builtin")
    result = load_entries([entry], generation=1)
    assert result.errors == {}
    return HandlerTable(result.loaded[0].registrar.hooks, {"models": "builtin"})


def in_session(session_id: str) -> ExecutionContext:
    return ExecutionContext(session_id=session_id, turn_id="t1", locale="en", active_plugin_ids=("models",),
                            plugin_id="models", runtime_id="narrator")


@pytest.mark.parametrize(("said", "end"), [("pieces", {"final": "abc"}), ("final", {"final": "whole"}), ("async", {"final": "async"}),
                                           ("broken", {"error": "RuntimeError: stream bug"}), ("wrong", None), ("other", None)])
async def test_run_model_stream_answers_with_a_stream_kept_open(models, said, end) -> None:
    """Its stream stays open for StreamModelAnswer (replace.responseStream), read here to its end; not a stream, or
    none: no answer (tests/hooks/test_model_streams.py has the RPC)."""
    pre = await dispatch(models, "PreLLMCall", in_session("s"), call(said))
    assert "response" not in pre.payload
    if end is None:
        assert "responseStream" not in pre.payload
        return
    stream = pre.payload["responseStream"]
    assert stream["plugin"] == "models"
    batches, claim = [], True
    while not batches or not ({"final", "error"} & batches[-1].keys()):
        batches.append(await OPEN_STREAMS.next_batch("models", stream["streamId"], session_id="s", claim=claim, wait_s=5))
        claim = False
    assert {key: batches[-1][key] for key in ("final", "error") if key in batches[-1]} == end


@pytest.mark.parametrize(("session_id", "model"), [("s-slot", "fast"), ("s-model", "openai:gpt-4o"), ("s-wrong", "story"),
                                                   ("s-none", "story")])
async def test_provide_model_options_chooses_the_sessions_model_or_slot(models, session_id, model) -> None:
    pre = await dispatch(models, "PreLLMCall", in_session(session_id), call("other"))
    assert pre.payload["model"] == model
