"""continue_prompt on PreStep after a step that continued (services/hooks/plugin_side/turn_hooks.py continue_prompt, the
adapter's pre_step): loaded from a real entry module, run by the real dispatcher."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry

pytestmark = pytest.mark.asyncio(loop_scope="session")

CONTINUING = '''
from shared.plugin_sdk.hookspecs import hookimpl

SEEN = []
ERRORS = []


class Early:
    """Registered first: called last."""

    @hookimpl
    def continue_prompt(self, prompt, tape, state):
        SEEN.append({"impl": "early", "prompt": prompt, "tape": tape.name, "roles": [e["role"] for e in tape.entries()],
                     "session_id": state.session_id, "run_id": state.run_id, "step": state.step, "status": state.status,
                     "output": state.output, "runtime_id": state.extra["runtime_id"]})
        return f"Early: go on from step {state.step}."


class Late:
    @hookimpl
    def continue_prompt(self, prompt, tape, state):
        SEEN.append({"impl": "late", "prompt": prompt})
        if prompt == "raise":
            raise RuntimeError("continue bug")
        if prompt == "wrong":
            return 42
        if prompt == "late":
            return "Late: check the lamp."
        return None

    @hookimpl
    def on_error(self, stage, error, message):
        ERRORS.append((stage, str(error)))


class Inbox:
    def drain(self, session_id):
        return ["Psst!"]


class Steering:
    @hookimpl
    def provide_steering_inbox(self):
        return Inbox()


def register(covel):
    covel.register_hookimpls(Early())
    covel.register_hookimpls(Late())
    covel.register_hookimpls(Steering())
'''
EXECUTION = ExecutionContext(session_id="s", turn_id="t1", locale="en", active_plugin_ids=("continuing",), plugin_id="continuing",
                             runtime_id="narrator")
CONVERSATION = [{"role": "user", "content": "Look around."}, {"role": "assistant", "content": "Checking.", "tool_calls": [{"id": "c"}]},
                {"role": "tool", "tool_call_id": "c", "content": "{}"}]


@pytest.fixture
def continuing(tmp_path: Path):
    (tmp_path / "continuing" / "server").mkdir(parents=True)
    (tmp_path / "continuing" / "server" / "index.py").write_text(CONTINUING)
    entry = PluginEntry("continuing", tmp_path / "continuing", "server/index.py", (("PreStep", "normal"), ("PostRuntime", "normal")),
                        "builtin")
    result = load_entries([entry], generation=1)
    assert result.errors == {}, result.errors
    module = sys.modules["covel_plugin_continuing_g1.server.index"]
    module.SEEN.clear()
    module.ERRORS.clear()
    return HandlerTable(result.loaded[0].registrar.hooks, {"continuing": "builtin"}), module


def step(prompt=None, *, number: int = 2, steering: bool = False, **fields) -> dict:
    previous = {"status": "continue", "prompt": prompt, "output": "Checking.", "messages": CONVERSATION}
    return {"step": number, "stepsRemaining": 5, "maxSteps": 8, "toolNames": ["look"], "toolChoice": "auto", "steering": steering,
            "previous": previous, **fields}


async def test_the_first_text_in_pluggy_order_is_the_next_prompt(continuing) -> None:
    table, module = continuing
    result = await dispatch(table, "PreStep", EXECUTION, step("late"))
    assert result.payload["nextPrompt"] == "Late: check the lamp."
    assert [seen["impl"] for seen in module.SEEN] == ["late"], "a text ends the chain"


async def test_none_asks_the_next_impl_which_sees_the_step_that_ended(continuing) -> None:
    table, module = continuing
    result = await dispatch(table, "PreStep", EXECUTION, step(None, number=3))
    assert result.payload["nextPrompt"] == "Early: go on from step 2."
    late, early = module.SEEN
    assert late == {"impl": "late", "prompt": None}
    assert early == {"impl": "early", "prompt": None, "tape": "s", "roles": ["user", "assistant", "tool"], "session_id": "s",
                     "run_id": "t1:narrator", "step": 2, "status": "continue", "output": "Checking.", "runtime_id": "narrator"}


async def test_a_raising_or_wrong_typed_impl_is_skipped_and_a_raise_reported_to_on_error(continuing) -> None:
    table, module = continuing
    raised = await dispatch(table, "PreStep", EXECUTION, step("raise"))
    assert raised.payload["nextPrompt"] == "Early: go on from step 1."
    assert module.ERRORS == [("continue_prompt", "continue bug")]
    wrong = await dispatch(table, "PreStep", EXECUTION, step("wrong"))
    assert wrong.payload["nextPrompt"] == "Early: go on from step 1." and len(module.ERRORS) == 1
    assert [trace[2] for trace in raised.raw_trace + wrong.raw_trace] == ["ok", "ok"], "the handler never fails"


async def test_not_asked_without_a_continued_step_or_when_a_next_prompt_is_set(continuing) -> None:
    table, module = continuing
    first = {key: value for key, value in step("late", number=1).items() if key != "previous"}
    assert "nextPrompt" not in (await dispatch(table, "PreStep", EXECUTION, first)).payload
    done = step("late")
    done["previous"] = {**done["previous"], "status": "done"}
    assert "nextPrompt" not in (await dispatch(table, "PreStep", EXECUTION, done)).payload
    earlier = await dispatch(table, "PreStep", EXECUTION, step("late", nextPrompt="An earlier plugin's."))
    assert earlier.payload["nextPrompt"] == "An earlier plugin's."
    assert module.SEEN == []


async def test_the_steering_inbox_and_continue_prompt_answer_the_same_step(continuing) -> None:
    table, _ = continuing
    result = await dispatch(table, "PreStep", EXECUTION, step("late", steering=True, interjections=["Hey."]))
    assert result.payload["interjections"] == ["Hey.", "Psst!"] and result.payload["nextPrompt"] == "Late: check the lamp."
