"""ctx.plugin_data with in-execution visibility, and io.selfData prompt rows read through it.

Function handlers and agent runtimes both read a plugin's data this way, so it is its own object
that both executions receive at construction."""

from __future__ import annotations

from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.catalogue import Runtime
from services.scheduler.execution.plugin_data_reads import entries_by_address, read_name
from services.scheduler.execution.plugin_data_view import PluginDataView
from services.scheduler.execution.self_data import self_data_block
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.hooks.bus import ExecutionScope
from services.scheduler.kinds import ProposalType
from shared.manifest import CompiledManifest
from shared.plugin_data.execution_view import BufferedWrite, ExecutionView


class PluginDataViews:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub) -> None:
        self._store = store

    async def committed(self, shared: TurnShared, session_id: str, plugin_id: str, namespace: str | None = None) -> dict:
        """A plugin's committed values ((namespace, key) -> value) in one namespace, or all of them (None).
        Committed data does not change while the turn holds its lease (a detached job's commit checks that it did not
        meanwhile, by the revision noted here): each is read once a turn."""
        name = read_name(plugin_id, namespace)

        async def read() -> dict:
            reply = await self._store.ListPluginData(
                store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=plugin_id, namespace=namespace or ""),
            )
            shared.revisions[name] = reply.revision
            return entries_by_address(reply.entries)

        return dict(await shared.read_once(name, read))

    async def as_execution_sees(self, shared: TurnShared, session_id: str, plugin_id: str) -> dict:
        """All of a plugin's data as an execution starting now sees it: committed values, then the plugin's writes
        of the runtimes that finished before (what a prompt.segment@1 provider of the plugin is handed)."""
        committed = await self.committed(shared, session_id, plugin_id)
        entries, _ = ExecutionView(committed, shared.plugin_data_writes(plugin_id)).list(None)
        return entries

    async def as_run_sees(self, shared: TurnShared, session_id: str, plugin_id: str, own: list[dict]) -> dict[str, dict]:
        """A plugin's data as a running agent sees it, for the plugin tools and services it calls: what
        as_execution_sees gives, then the run's own plugin.data* writes of that plugin (`own`: {type, payload}),
        as {namespace: {key: value}} without `_` namespaces."""
        committed = await self.committed(shared, session_id, plugin_id)
        mine = [BufferedWrite("(this run)", w["type"], w["payload"]) for w in own if str(w.get("type", "")).startswith(ProposalType.PLUGIN_DATA)]
        entries, _ = ExecutionView(committed, shared.plugin_data_writes(plugin_id), mine).list(None)
        data: dict[str, dict] = {}
        for (namespace, key), value in entries.items():
            if not namespace.startswith("_"):
                data.setdefault(namespace, {})[key] = value
        return data

    def view(self, runtime: Runtime, session_id: str, shared: TurnShared) -> PluginDataView:
        """ctx.plugin_data: committed values, then this plugin's writes from runtimes that finished
        before this one's layer (in commit order), then the runtime's own."""

        async def load_committed(namespace: str | None) -> dict:
            return await self.committed(shared, session_id, runtime.plugin_id, namespace)

        return PluginDataView(runtime.plugin_id, load_committed, upstream=shared.plugin_data_writes(runtime.plugin_id))

    async def self_data_blocks(self, runtime: Runtime, scope: ExecutionScope, shared: TurnShared, manifest: CompiledManifest,
                               upstream: bool = True) -> list[str]:
        """io.selfData: the runtime's own plugin data as prompt rows, seen as its handler would see it
        (`upstream=False` for a nested run: committed values only)."""
        declarations = manifest.io.self_data
        if not declarations:
            return []
        view = self.view(runtime, scope.session.id, shared)
        if not upstream:
            view.upstream = []
        blocks = []
        for declaration in declarations:
            if declaration.namespace.startswith("_hidden"):
                continue  # hidden data never reaches a prompt
            blocks.append(self_data_block(declaration, await view.list(declaration.namespace)))
        return blocks
