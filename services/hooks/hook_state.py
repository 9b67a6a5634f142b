"""ctx.state for the hooks service's handlers: every access is one store call (services/store/hook_state.py),
so whichever replica serves the next event sees it; the calls go on one HookStateCalls stream the service keeps
open (shared/call_streams.py), each with AccessHookState's checks, deadline and errors. Sandboxed handlers reach it through their worker:
the host binds the session and the plugin, the worker names only the operation, the key and the value."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.call_streams import StreamCalls
from shared.grpc_client import deadline_of
from shared.structs import from_value, to_value

SERVICE = "covel.store.v1.TransactionalStore"

# What a plugin's mistake is answered with (it raises in its handler, with the store's reason).
MISTAKES = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION)


class StoreState:
    """The StateBackend (shared/plugin_sdk/session_state.py) of the hooks service."""

    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub) -> None:
        self._calls = StreamCalls(lambda: store.HookStateCalls(), store_pb2.HookStateCallsRequest)

    async def access(self, session_id: str, plugin_id: str, op: str, key: str, value: Any = None) -> tuple[bool, Any]:
        request = store_pb2.AccessHookStateRequest(session_id=session_id, plugin_id=plugin_id, op=op, key=key,
                                                   value=to_value(value) if op in ("set", "add") else None)
        try:
            reply = await self._calls.call("access", request, deadline_of(SERVICE, "AccessHookState").seconds)
        except grpc.aio.AioRpcError as error:
            if error.code() in MISTAKES:
                raise ValueError(f"ctx.state.{op}({key!r}): {error.details()}") from None
            raise RuntimeError(f"ctx.state.{op}({key!r}): the store did not answer ({error.code().name})") from None
        return reply.found, from_value(reply.value) if reply.found else None


def state_capability(backend: StoreState, session_id: str, plugin_id: str) -> Callable[[str, list[Any], dict[str, Any]], Awaitable[dict[str, Any]]]:
    """A sandboxed hook call's ctx capability: `state` (op, key, value) for its own session and plugin only."""

    async def capability(op: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        if op != "state" or len(args) != 3 or not isinstance(args[0], str) or not isinstance(args[1], str):
            raise LookupError(f"a hook's ctx has no capability {op!r}")
        found, value = await backend.access(session_id, plugin_id, args[0], args[1], args[2])
        return {"found": found, "v": value}

    return capability
