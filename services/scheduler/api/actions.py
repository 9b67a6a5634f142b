"""A running plugin's registered actions and commands: InvokeAction, ListCommands, RunCommand. An action runs
through the hooks service's CallAction as a turn of origin `action` (turn/plugin_actions.py)."""

from __future__ import annotations

import grpc

from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.idempotency_keys import check_idempotency_key
from services.scheduler.api.running_packages import RunningPackages
from services.scheduler.execution.runtime_scope import unseen_events
from services.scheduler.public_api import request_texts, respond
from services.scheduler.turn.concealment import conceal_turn
from services.scheduler.turn.plugin_actions import (
    ACTION_ORIGIN,
    ActionCall,
    check_action,
    command_context,
    parse_command,
    session_commands,
)
from services.scheduler.turn.request import ActionRun, TurnRequest
from services.scheduler.turn.runner import TurnRunner
from shared.errors import not_found, require, rpc
from shared.page_tokens import pages
from shared.structs import from_struct


class Actions:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, runner: TurnRunner, running_packages: RunningPackages) -> None:
        self._store = store
        self._runner = runner
        self._running_packages = running_packages

    @rpc
    async def InvokeAction(self, request: scheduler_pb2.InvokeActionRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.InvokeActionResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.plugin_id, "plugin_id", "the running plugin whose action to call")
        require(request.action, "action", "an action of the plugin's contributes.actions")
        check_idempotency_key(request.idempotency_key)
        packages = await self._running_packages.of(request.session_id)
        if all(package.id != request.plugin_id for package in packages):
            why = await self._running_packages.why_not_running(request.session_id, request.plugin_id)
            raise not_found(f"plugin_id: {request.plugin_id} does not run in this session ({why})", "covel.registry.v1.PluginPackage",
                            request.plugin_id, reason="PLUGIN_NOT_ACTIVE")
        check_action(packages, request.plugin_id, request.action)
        return await self._invoke(request.session_id, ActionCall(request.plugin_id, request.action, from_struct(request.payload)),
                                  request.idempotency_key)

    @rpc
    @pages("commands")
    async def ListCommands(self, request: scheduler_pb2.ListCommandsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListCommandsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        packages = await self._running_packages.of(request.session_id, session)
        return respond(scheduler_pb2.ListCommandsResponse, commands=session_commands(packages, session.locale))

    @rpc
    async def RunCommand(self, request: scheduler_pb2.RunCommandRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.InvokeActionResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.text, "text", "the command line, e.g. /roll 2d6")
        check_idempotency_key(request.idempotency_key)
        session = (await self._store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        packages = await self._running_packages.of(request.session_id, session)
        command, args = parse_command(request.text.strip(), session_commands(packages))
        payload: dict = {"args": args, "context": command_context(request_texts(command, "context"), session, packages)}
        return await self._invoke(request.session_id, ActionCall(command.plugin_id, command.action, payload), request.idempotency_key)

    async def _invoke(self, session_id: str, call: ActionCall, idempotency_key: str) -> scheduler_pb2.InvokeActionResponse:
        turn = await self._runner.run_observed(TurnRequest(session_id, idempotency_key, ActionRun(call), origin=ACTION_ORIGIN), unseen_events)
        return respond(scheduler_pb2.InvokeActionResponse, result_json=call.result_json, turn=conceal_turn(turn))
