"""The turn hooks of the Python hookspecs the hooks service calls (spec: python-hookspecs, "Turn Hooks"),
on the events the adapter registers for them (services/hooks/plugin_side/hookspec_adapter.py):

| hook         | event               | what its answer does                                              |
|--------------|---------------------|-------------------------------------------------------------------|
| run_model    | PreLLMCall          | the call's answer: replace.response, the model is not asked       |
| run_model_stream | PreLLMCall      | the same, or its stream kept open: replace.responseStream (model_streams.py) |
| build_prompt | PostContextAssembly | the runtime's prompt: the last user message's content, replaced   |
| continue_prompt | PreStep after a step that continued | the next step's prompt: replace.nextPrompt  |

Each calls the impls in pluggy's order and takes the first answer that is not None; an impl that
raises or answers the wrong type is logged and skipped (PluginAgentHooks' rules).
"""

from __future__ import annotations

from typing import Any

from services.hooks.plugin_side.app_hooks import MessagesTape
from services.hooks.plugin_side.model_streams import StreamAnswer, open_answer
from shared.plugin_sdk.agent_plugins import RAISED, PluginAgentHooks
from shared.plugin_sdk.hookspecs import LLMCallRequest, StreamState, TurnState


async def run_model(hooks: PluginAgentHooks, request: LLMCallRequest, state: TurnState) -> str | StreamAnswer | None:
    """run_model(prompt, session_id, state), then run_model_stream: `prompt` is the call's messages; the first
    answer wins: a text, or a stream kept open for StreamModelAnswer (model_streams.open_answer)."""
    arguments = {"prompt": request.messages, "session_id": state["session_id"], "state": state}
    text = await hooks.first_text("run_model", **arguments)
    if text is not None:
        return text
    for impl in hooks.impls("run_model_stream"):
        outcome = await hooks.call("run_model_stream", impl, **arguments)
        if outcome is None or outcome is RAISED:
            continue
        answer = await open_answer(hooks, impl, outcome, state["session_id"])
        if answer is not None:
            return answer
    return None


def envelope(messages: list[Any], state: TurnState) -> dict[str, Any] | None:
    """The inbound message of this runtime's prompt as an envelope: the last user message's content."""
    content = next((m.get("content") for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), None)
    if content is None:
        return None
    return {"content": content, "session_id": state["session_id"], "channel": "grpc", "turn_id": state["turn_id"]}


def prompt_text(outcome: Any) -> str | None:
    """A build_prompt answer as the message content the gateway takes: a string, or the text of content parts."""
    if isinstance(outcome, str):
        return outcome
    if isinstance(outcome, list) and all(isinstance(part, dict) for part in outcome):
        return "\n".join(str(part.get("text") or "") for part in outcome if part.get("type", "text") == "text")
    return None


async def build_prompt(hooks: PluginAgentHooks, messages: list[Any], state: TurnState) -> list[Any] | None:
    """The messages with the last user message's content replaced by the first build_prompt answer (None: unchanged)."""
    message = envelope(messages, state)
    if message is None:
        return None
    for impl in hooks.impls("build_prompt"):
        outcome = await hooks.call("build_prompt", impl, message=message, session_id=state["session_id"], state=state)
        if outcome is None or outcome is RAISED:
            continue
        text = prompt_text(outcome)
        if text is None:
            hooks.wrong_type("build_prompt", impl, outcome, "list[UserContent] or str")
            continue
        index = max(i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user")
        return [*messages[:index], {**messages[index], "content": text}, *messages[index + 1:]]
    return None


async def continue_prompt(hooks: PluginAgentHooks, payload: dict[str, Any], state: TurnState) -> str | None:
    """PreStep after a step that ended with status "continue" (`previous`, the spec's StepFinished): the first
    text continue_prompt(prompt, tape, state) answers is the next step's prompt (replace.nextPrompt). None: no
    next prompt, the run goes on as it would; also when an earlier plugin's handler already set one."""
    previous = payload.get("previous")
    if not isinstance(previous, dict) or previous.get("status") != "continue" or isinstance(payload.get("nextPrompt"), str):
        return None
    step = payload.get("step")
    ended = StreamState(
        session_id=state["session_id"], run_id=f"{state['turn_id']}:{state['runtime_id']}",
        step=step - 1 if isinstance(step, int) and step > 1 else 0, status="continue",
        output=str(previous.get("output") or ""), extra=state)
    tape = MessagesTape(state["session_id"], tuple(m for m in previous.get("messages") or () if isinstance(m, dict)))
    return await hooks.first_text("continue_prompt", prompt=previous.get("prompt"), tape=tape, state=ended)


# ----- around the turn: load_state on TurnStart; save_state, render_outbound, dispatch_outbound on message:sent


def inbound(payload: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """TurnStart's player message as an envelope."""
    return {"content": str(payload.get("playerMessage") or ""), "session_id": ctx.session_id, "channel": "grpc",
            "turn_id": ctx.turn_id, "actions": list(payload.get("actions") or [])}



async def after_turn(hooks: PluginAgentHooks, session_id: str, state: TurnState, message: dict[str, Any], model_output: str) -> int:
    """save_state, then render_outbound's envelopes each handed to dispatch_outbound (the first impl that
    answers True delivered it); the number delivered."""
    await hooks.notify_all("save_state", session_id=session_id, state=state, message=message, model_output=model_output)
    outbound: list[Any] = []
    for impl in hooks.impls("render_outbound"):
        outcome = await hooks.call("render_outbound", impl, message=message, session_id=session_id, state=state,
                                   model_output=model_output)
        if isinstance(outcome, list):
            outbound.extend(outcome)
        elif outcome is not None and outcome is not RAISED:
            hooks.wrong_type("render_outbound", impl, outcome, "list[Envelope]")
    return sum([await dispatch_one(hooks, envelope) for envelope in outbound])


async def dispatch_one(hooks: PluginAgentHooks, envelope: Any) -> bool:
    for impl in hooks.impls("dispatch_outbound"):
        outcome = await hooks.call("dispatch_outbound", impl, message=envelope)
        if outcome is True:
            return True
        if outcome is not None and outcome is not RAISED and not isinstance(outcome, bool):
            hooks.wrong_type("dispatch_outbound", impl, outcome, "bool")
    return False
