"""What a function handler's ctx reaches beyond its own values: ctx.world (frozen views of the
world model), ctx.store (the session view, the plugin's data), ctx.tools (plugin tools through
PreToolUse/PostToolUse, like an agent's calls) and ctx.gateway (model calls in the runtime's slot).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import grpc

from covel.common.v1 import common_pb2
from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler import outages
from services.scheduler.catalogue import Runtime
from services.scheduler.execution.tool_call_hooks import post_tool_use, pre_tool_use
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.session_views import session_view
from shared.ids import new_id
from shared.plugin_sdk import freeze, thaw
from shared.plugin_sdk.tools import tool_error
from shared.structs import to_struct

# Spec (Function 的工具和超时): a silent model call is given up at half the time left, at least 60 s
# (COVEL_SCHEDULER_STALL_RESEND_MIN_MS), and sent once more with the rest; with 60 s or less left it is sent once.
STALL_RESEND_MIN_S = 60.0
# The gateway ends the call within its budget; this only lets its answer arrive before our deadline.
GATEWAY_REPLY_SLACK_S = 1.0


def stall_resend_wait(remaining_s: float, floor_s: float = STALL_RESEND_MIN_S) -> float:
    """How long ctx.gateway's first send waits for a reply before its one re-send: half the time
    left, at least `floor_s`; all of it (no re-send) when `floor_s` or less is left."""
    if remaining_s <= floor_s:
        return remaining_s
    return max(remaining_s / 2, floor_s)


class StoreView:
    """ctx.store: get_session() (PluginSessionView), and the plugin's own data (same as ctx.plugin_data)."""

    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, session_id: str, plugin_data: Any) -> None:
        self._store = store
        self._session_id = session_id
        self._plugin_data = plugin_data

    async def get_session(self) -> Mapping[str, Any]:
        """{phase, completedPlayerTurns, locale, setupRuntimes}, read now; raises when the session is gone."""
        try:
            session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=self._session_id))).session
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise LookupError(f"store.get_session(): session {self._session_id} no longer exists") from error
            raise
        return freeze(session_view(session))

    async def get_plugin_data(self, namespace: str, key: str, default: Any = None) -> Any:
        return await self._plugin_data.get(namespace, key, default)

    async def list_plugin_data(self, namespace: str | None = None) -> dict[str, Any]:
        return await self._plugin_data.list(namespace)


class ToolsView:
    """ctx.tools.call(name, args): a plugin tool of function.tools, with PreToolUse before and
    PostToolUse after, as an agent's call has. Answers the unified result {ok, data | error}."""

    def __init__(self, runtime: Runtime, scope: ExecutionScope, hooks: HookBus, allowed: Iterable[str], trace: list[common_pb2.HookTraceEntry],
                 world: Callable[[], dict[str, Any] | None] = lambda: None) -> None:
        self._runtime = runtime
        # The handler's ctx.world as it stands at the call (its own proposals included): the tool's context.world.
        self._world = world
        self._scope = scope
        self._hooks = hooks
        self._allowed = [name for name in allowed if isinstance(name, str)]
        self._trace = trace
        # Proposals the tools made ({type, payload}); they commit with the runtime's unit if it succeeds.
        self.writes: list[dict[str, Any]] = []

    async def call(self, name: str, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        call = {"id": new_id(), "name": name, "arguments": json.dumps(thaw(args or {}), ensure_ascii=False)}
        refused, call, answer = await pre_tool_use(call, self._runtime, self._scope, self._hooks, self._trace)
        if refused is not None:
            return json.loads(refused)
        if answer is not None:
            # A PreToolUse hook answered the call (replace.result): the tool does not run.
            text, _, _ = await post_tool_use(call, answer, self._runtime, self._scope, self._hooks, self._trace)
            return json.loads(text)
        if call["name"] not in self._allowed:
            # After PreToolUse: a hook may rename the call, but only to a tool the manifest allows.
            return tool_error("unauthorized", f"the tool {call['name']} is not in function.tools of {self._runtime.runtime_id}",
                              f"add it to function.tools, or use one of: {', '.join(self._allowed) or 'none'}")
        result = await self._hooks.call_tool(self._scope, self._runtime.plugin_id, self._runtime.runtime_id, call, self.writes,
                                             world=self._world())
        text, _, _ = await post_tool_use(call, result, self._runtime, self._scope, self._hooks, self._trace)
        return json.loads(text)


class ModelCallFailed(RuntimeError):
    pass


# What ctx.gateway.evaluate asks the model for.
EVALUATION: dict[str, Any] = {
    "type": "object", "required": ["verdict", "reason"], "additionalProperties": False,
    "properties": {"verdict": {"type": "boolean"}, "score": {"type": "number", "minimum": 0, "maximum": 1},
                   "reason": {"type": "string", "minLength": 1}},
}


class GatewayView:
    """ctx.gateway: text and JSON model calls through the LLM gateway, in the runtime's
    function.model slot (`plugin` when not written; a session override for the runtime wins)."""

    def __init__(self, gateway: gateway_pb2_grpc.LlmGatewayStub, runtime: Runtime, scope: ExecutionScope, slot: str, deadline: Any,
                 stall_resend_min_s: float = STALL_RESEND_MIN_S) -> None:
        self._gateway = gateway
        self._stall_resend_min_s = stall_resend_min_s
        self._runtime = runtime
        self._scope = scope
        self.slot = slot
        self._override = scope.session.runtime_model_overrides.get(runtime.runtime_id, "")
        # A callable: the monotonic time the handler must finish by.
        self._deadline = deadline

    async def generate_text(self, prompt: str | None = None, *, messages: list[dict[str, str]] | None = None,
                            system: str | None = None, temperature: float | None = None, max_tokens: int | None = None) -> str:
        reply = await self._generate(prompt, messages, system, None, temperature, max_tokens)
        return reply.message.content

    async def generate_object(self, prompt: str | None = None, *, schema: dict[str, Any], messages: list[dict[str, str]] | None = None,
                              system: str | None = None, name: str = "result", temperature: float | None = None) -> Any:
        """The reply parsed as JSON, asked for with `schema` as the response format."""
        response_format = gateway_pb2.ResponseFormat(name=name, schema=to_struct(schema))
        reply = await self._generate(prompt, messages, system, response_format, temperature, None)
        try:
            return json.loads(reply.message.content)
        except json.JSONDecodeError as error:
            raise ModelCallFailed(f"gateway.generate_object(): the reply is not JSON: {error}") from error

    async def evaluate(self, prompt: str | None = None, *, criteria: str, messages: list[dict[str, str]] | None = None,
                       system: str | None = None) -> dict[str, Any]:
        """A judgment of `prompt` (or `messages`) against `criteria` (the spec's ctx.gateway.evaluate): {verdict, score?,
        reason}, asked for with a fixed schema at temperature 0 in the runtime's slot."""
        if not isinstance(criteria, str) or not criteria.strip():
            raise ValueError("gateway.evaluate(prompt, criteria=): criteria says what the text must satisfy")
        instruction = (f"Judge the text against this criterion: {criteria.strip()}\nAnswer `verdict` (true when it holds), "
                       "optionally `score` from 0 to 1, and `reason`: one sentence saying why.")
        answer = await self.generate_object(prompt, schema=EVALUATION, messages=messages, name="evaluation", temperature=0,
                                            system=f"{system}\n\n{instruction}" if system else instruction)
        if not isinstance(answer, dict) or not isinstance(answer.get("verdict"), bool):
            raise ModelCallFailed("gateway.evaluate(): the reply has no boolean verdict")
        return answer

    async def _generate(self, prompt: str | None, messages: list[dict[str, str]] | None, system: str | None,
                        response_format: gateway_pb2.ResponseFormat | None, temperature: float | None,
                        max_tokens: int | None) -> gateway_pb2.GenerateResponse:
        chat = [{"role": "system", "content": system}] if system else []
        chat += [dict(m) for m in messages or []]
        if prompt is not None:
            chat.append({"role": "user", "content": prompt})
        if not chat:
            raise ValueError("gateway: give a prompt or messages")
        request = gateway_pb2.GenerateRequest(
            slot=self.slot, model_override=self._override,
            messages=[gateway_pb2.ChatMessage(role=str(m.get("role", "user")), content=str(m.get("content") or "")) for m in chat],
            origin=gateway_pb2.CallOrigin(session_id=self._scope.session.id, turn_id=self._scope.turn_id, runtime_id=self._runtime.runtime_id),
        )
        if response_format is not None:
            request.response_format.CopyFrom(response_format)
        if temperature is not None:
            request.temperature = temperature
        if max_tokens is not None:
            request.max_tokens = max_tokens
        remaining = self._deadline() - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("gateway: no time left in function.timeoutMs")
        # One logical call with one budget (8 HTTP attempts, the time left): the gateway's retries,
        # fallbacks and the re-send after a silent first send (its call timeout) all come out of it.
        first_wait = stall_resend_wait(remaining, self._stall_resend_min_s)
        request.timeout_ms = max(1, int(remaining * 1000))
        request.call_timeout_ms = max(1, int(first_wait * 1000))
        request.max_retries = 0 if first_wait >= remaining else 1
        try:
            # wait_for_ready: a gateway restarting is waited for within the budget (agent/model_call.py).
            reply = await self._gateway.GenerateOnce(request, timeout=remaining + GATEWAY_REPLY_SLACK_S, wait_for_ready=True)
        except grpc.aio.AioRpcError as error:
            outages.note("gateway", error)
            raise ModelCallFailed(f"gateway: {error.code().name}: {error.details()}") from error
        if reply.finish_reason in (gateway_pb2.FINISH_REASON_ERROR, gateway_pb2.FINISH_REASON_INTERRUPTED):
            raise ModelCallFailed(f"gateway: the model call failed: {reply.error_message or 'no reason given'}")
        return reply
