"""gRPC surface of the hook dispatcher."""

from __future__ import annotations

import grpc

from covel.common.v1 import common_pb2
from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.registry.v1 import registry_pb2_grpc
from services.hooks.catalogue_sync import CatalogueSync
from services.hooks.dispatcher import ExecutionContext, dispatch
from services.hooks.settings import HooksSettings
from shared.errors import invalid_argument, rpc
from shared.grpc_client import open_channel
from shared.grpc_server import RunningServer, start_server
from shared.hook_events import EVENTS_BY_NAME
from shared.structs import from_struct, to_struct


class HookDispatcherService(hooks_pb2_grpc.HookDispatcherServicer):
    def __init__(self, sync: CatalogueSync) -> None:
        self._sync = sync

    @rpc
    async def Dispatch(self, request: hooks_pb2.DispatchRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.DispatchResponse:
        if request.event not in EVENTS_BY_NAME:
            raise invalid_argument("event", f"unknown hook event {request.event!r}; one of {', '.join(EVENTS_BY_NAME)}")
        if not request.context.session_id:
            raise invalid_argument("context.session_id", "is required")
        ctx = request.context
        execution = ExecutionContext(
            session_id=ctx.session_id,
            turn_id=ctx.turn_id,
            locale=ctx.locale or "en",
            active_plugin_ids=tuple(ctx.active_plugin_ids),
            approved_plugin_ids=frozenset(ctx.approved_plugin_ids),
            plugin_id=ctx.plugin_id or None,
            runtime_id=ctx.runtime_id or None,
            logical_turn=ctx.logical_turn or None,
            plugin_settings={key: from_struct(value) for key, value in ctx.plugin_settings.items()},
        )
        result = await dispatch(self._sync.current.table, request.event, execution, from_struct(request.payload))
        return hooks_pb2.DispatchResponse(
            outcome=hooks_pb2.OUTCOME_ABORT if result.aborted else hooks_pb2.OUTCOME_CONTINUE,
            reason=result.reason,
            payload=to_struct(result.payload),
            trace=[
                common_pb2.HookTraceEntry(
                    event=entry.event,
                    handler_plugin_id=entry.handler_plugin_id,
                    status=entry.status,
                    message=entry.message,
                    duration_us=entry.duration_us,
                )
                for entry in result.trace
            ],
        )

    @rpc
    async def GetSubscriptions(
        self, request: hooks_pb2.GetSubscriptionsRequest, context: grpc.aio.ServicerContext
    ) -> hooks_pb2.GetSubscriptionsResponse:
        return self._subscriptions()

    @rpc
    async def Reload(self, request: hooks_pb2.ReloadRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.ReloadResponse:
        loaded = await self._sync.reload()
        return hooks_pb2.ReloadResponse(generation=loaded.generation)

    def _subscriptions(self) -> hooks_pb2.GetSubscriptionsResponse:
        loaded = self._sync.current
        return hooks_pb2.GetSubscriptionsResponse(
            subscriptions=[
                hooks_pb2.Subscription(event=event, plugin_ids=plugin_ids)
                for event, plugin_ids in loaded.table.subscribers().items()
            ],
            generation=loaded.generation,
            load_errors=[
                common_pb2.Diagnostic(
                    severity=common_pb2.SEVERITY_ERROR,
                    code="entry-load-failed",
                    message=message,
                    plugin_id=plugin_id,
                    file="server/index.py",
                )
                for plugin_id, message in loaded.load_result.errors.items()
            ],
        )


async def start(settings: HooksSettings) -> RunningServer:
    registry_channel = open_channel(settings.registry_addr)
    sync = CatalogueSync(registry_pb2_grpc.PluginRegistryStub(registry_channel))
    await sync.reload_when_registry_is_up(settings.hooks_registry_wait_s)
    service = HookDispatcherService(sync)

    def add(server: grpc.aio.Server) -> list[str]:
        hooks_pb2_grpc.add_HookDispatcherServicer_to_server(service, server)
        return [hooks_pb2.DESCRIPTOR.services_by_name["HookDispatcher"].full_name]

    running = await start_server(settings.hooks_addr, add)
    running.on_shutdown.append(registry_channel.close)
    return running
