"""What every runtime of one turn reads and shares: the session, the packages, the history, the committed world
and the other reads made once per turn, and the proposals of the runtimes that finished (their plugin data and
world writes are what a runtime starting now sees upstream). The turn owns it (turn/state.py) and hands it to
each execution inside its RuntimeScope."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2
from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Package, Runtime
from services.scheduler.execution.inputs import CommittedExports
from services.scheduler.kinds import ProposalType, RuntimeType
from shared.manifest import CompiledManifest
from shared.plugin_data.execution_view import BufferedWrite
from shared.structs import from_struct

T = TypeVar("T")


@dataclass
class TurnShared:
    """The turn as its runtimes read it, each read made once for all of them."""

    history: list[common_pb2.Message]
    packages: dict[str, Package]
    # runtime id -> its compiled manifest, for every runtime of the turn's packages.
    manifests: dict[str, CompiledManifest] = field(default_factory=dict)
    # The session as the turn found it (phase, setup progress).
    session: store_pb2.Session | None = None
    # The committed world model, read with the turn's lease.
    world: store_pb2.GetWorldResponse | None = None
    # The session's committed exports (recordAs), read once when a committed-scope input needs them.
    exports: CommittedExports | None = None
    # session.world-context@1, once a runtime of the turn bound it (execution/world_context.py).
    world_context: dict[str, Any] | None = None
    # (world id, locale) -> the world as the registry serves it, None when it has none (the scheduler's plugin
    # cache, which keeps it per catalogue generation); None: ask the registry (execution/world_record.py).
    worlds: Callable[[str, str], Awaitable[registry_pb2.World | None]] | None = None
    # What the turn's runtimes proposed so far, in commit order (only finished runtimes' are here).
    proposals: list[store_pb2.Proposal] = field(default_factory=list)
    # Read name (plugin_data_reads.read_name) -> the revision the store answered with that committed plugin data:
    # what a detached job's commit checks (plugin_data_reads.read_checks).
    revisions: dict[str, str] = field(default_factory=dict)
    # The subagent providers of the session's packages, found once per turn (subagent_providers()).
    _subagent_providers: list[tuple[Runtime, CompiledManifest]] | None = field(default=None, init=False, repr=False)
    # Reads of the turn's shared data (the world, the exports, committed plugin data), in flight or done (read_once()).
    _reads: dict[str, asyncio.Future[Any]] = field(default_factory=dict, init=False, repr=False)
    # plugin id -> its plugin.data* proposals as buffered writes, in order; and how many proposals that covers.
    _plugin_data_writes: dict[str, list[BufferedWrite]] = field(default_factory=dict, init=False, repr=False)
    _proposals_indexed: int = field(default=0, init=False, repr=False)
    # ctx.world's states of the turn (execution/world_view.py), one per committed world and upstream world proposals.
    world_states: dict[Any, Any] = field(default_factory=dict, init=False, repr=False)
    # id(proposal) -> (the proposal, its buffered write): converted once for the turn and every view of it (seeing()).
    _converted: dict[int, tuple[store_pb2.Proposal, BufferedWrite]] = field(default_factory=dict, init=False, repr=False)

    def seeing(self, proposals: list[store_pb2.Proposal]) -> TurnShared:
        """The turn as one runtime sees it: `proposals` are the finished units' it may read (its upstream's, in commit
        order), the rest (the reads made once, the caches) shared with the turn."""
        view = copy.copy(self)
        view.proposals = proposals
        view._plugin_data_writes = {}
        view._proposals_indexed = 0
        return view

    def plugin_data_writes(self, plugin_id: str) -> list[BufferedWrite]:
        """The plugin's plugin.data* proposals so far (runtimes that finished), in order, as buffered writes.
        Each proposal is converted once, as it comes (proposals only grow during the stages): every runtime's
        ctx.plugin_data converted them all, N² from_struct calls for N runtimes that write."""
        for proposal in self.proposals[self._proposals_indexed:]:
            if proposal.type.startswith(ProposalType.PLUGIN_DATA):
                converted = self._converted.get(id(proposal))
                if converted is None or converted[0] is not proposal:
                    converted = self._converted[id(proposal)] = (
                        proposal, BufferedWrite(proposal.runtime_id, proposal.type, from_struct(proposal.payload)))
                write = converted[1]
                self._plugin_data_writes.setdefault(proposal.plugin_id, []).append(write)
        self._proposals_indexed = len(self.proposals)
        return list(self._plugin_data_writes.get(plugin_id, ()))

    async def read_once(self, name: str, read: Callable[[], Awaitable[T]]) -> T:
        """`read()`'s value, read once per turn: a layer's runtimes start together and all await the one
        read in flight (each sent its own before: a layer of 67 function runtimes made 67 GetWorld calls).
        A read that failed is tried again by the next caller; a caller cancelled does not cancel it for the others."""
        pending = self._reads.get(name)
        if pending is None:
            pending = self._reads[name] = asyncio.ensure_future(read())
        try:
            value: T = await asyncio.shield(pending)
            return value
        except Exception:
            if self._reads.get(name) is pending and pending.done():
                del self._reads[name]
            raise

    def seed(self, name: str, value: Any) -> None:
        """A read the turn already has (its lease answered it): read_once(name) returns it without reading."""
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(value)
        self._reads[name] = done

    def read_names(self) -> list[str]:
        """The names of the reads this turn made (or was seeded with) that succeeded, in order."""
        return [name for name, read in self._reads.items() if read.done() and not read.cancelled() and read.exception() is None]

    def subagent_providers(self) -> list[tuple[Runtime, CompiledManifest]]:
        """(runtime, manifest) of every subagentOnly agent runtime in the turn's packages, found once:
        every function runtime's ctx.agents needs it."""
        if self._subagent_providers is None:
            self._subagent_providers = [
                (runtime, runtime.manifest) for package in self.packages.values() for runtime in package.runtimes
                if runtime.type == RuntimeType.AGENT and runtime.manifest.schedule.subagent_only
            ]
        return self._subagent_providers

    def output_contracts(self) -> dict[str, str]:
        """runtime id -> its io.output.contract, for every runtime of the session's packages."""
        return {
            runtime_id: contract for runtime_id, manifest in self.manifests.items() if (contract := manifest.io.output.contract)
        }
