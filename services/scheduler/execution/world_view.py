"""ctx.world of a function handler or guard, and a tool's or an action's context.world: the committed world model as
the turn found it (read once per turn), with the world proposals the execution may see laid over (an in-execution
preview, not committed values), the session's seats and the world's record. One view for every caller."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from covel.registry.v1 import registry_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.execution.world_record import read_world_record
from services.scheduler.hooks.bus import ExecutionScope
from services.scheduler.kinds import ProposalType
from shared.plugin_sdk import freeze, thaw
from shared.plugin_sdk.world_preview import WorldPreview
from shared.structs import from_struct, from_value

T = TypeVar("T")


class WorldState:
    """The committed world with some world proposals applied, as plain values (`plain`: shared, never changed: what a
    sandboxed handler is sent) and frozen (what ctx.world hands out). Built once per turn for each set of upstream
    world proposals that views see (most see none) and shared by those views, until one buffers its own."""

    __slots__ = ("characterSchema", "characters", "dimensions", "plain", "preview", "producers")

    def __init__(self, preview: WorldPreview, producers: dict[str, set[str]]) -> None:
        self.preview = preview
        self.producers = producers
        # The preview's own values: a view copies the preview before buffering into it (buffered), so these stay.
        self.plain = {"characterSchema": preview.character_schema, "characters": preview.character_list(),
                      "dimensions": preview.dimensions}
        self.characterSchema = freeze(self.plain["characterSchema"])
        self.characters = freeze(self.plain["characters"])
        self.dimensions = freeze(self.plain["dimensions"])

    @classmethod
    def of(cls, world: store_pb2.GetWorldResponse, upstream: Iterable[store_pb2.Proposal]) -> WorldState:
        # characters / characterSchema -> the upstream runtimes whose proposals show in them: a reader depends on them.
        producers: dict[str, set[str]] = {"characters": set(), "characterSchema": set()}
        preview = WorldPreview(
            from_struct(world.character_schema) if world.HasField("character_schema") else None,
            {c.id: {**from_struct(c.data), "id": c.id, "version": c.version} for c in world.characters},
            {d.id: {"name": d.name, "description": d.description, "schema": from_struct(d.schema), "value": from_value(d.value),
                    "version": d.version} for d in world.dimensions})
        for proposal in upstream:
            changed = preview.apply(proposal.type, from_struct(proposal.payload))
            if changed in producers:
                producers[changed].add(proposal.runtime_id)
        return cls(preview, producers)

    def buffered(self, type: str, payload: Any) -> WorldState | None:
        """A new state with the proposal applied, or None when it changes nothing of the world (this state is kept)."""
        preview = WorldPreview(self.preview.character_schema, dict(self.preview.characters), dict(self.preview.dimensions))
        if not preview.apply(type, payload):
            return None
        return WorldState(preview, self.producers)


class WorldView:
    """ctx.world: the committed world model as the turn found it, plus the valid world proposals of
    upstream runtimes that finished before this one and the run's own as it buffers them (an in-execution
    preview, not committed values). Everything is frozen: copy before changing (`shared.plugin_sdk.thaw`);
    reading again returns the same objects until the run buffers a world proposal.
    `cache` (the turn's, TurnShared.world_states): views of the same committed world and upstream share one state."""

    __slots__ = ("_reads", "_record_plain", "_seats_plain", "_state", "producers", "seats", "worldRecord")
    _state: WorldState

    def __init__(self, world: store_pb2.GetWorldResponse, upstream: Iterable[store_pb2.Proposal] = (),
                 seats: Iterable[store_pb2.Seat] = (), world_record: Mapping[str, Any] | None = None,
                 cache: dict[Any, Any] | None = None) -> None:
        upstream = list(upstream)
        object.__setattr__(self, "_state", _cached(cache, ("world", world, *upstream), lambda: WorldState.of(world, upstream)))
        self.producers = self._state.producers
        self._reads: set[str] | None = None
        # The session's seats as the turn found them (a switch takes effect next turn).
        self._seats_plain = [{"id": seat.id, "role": seat.role, "currentCharacterId": seat.character_id or None,
                              "characterIds": list(seat.character_ids)} for seat in seats]
        self.seats = freeze(self._seats_plain)
        # The session's world as the registry holds it (services/scheduler/function/world_record.py); None without a world.
        self._record_plain = world_record
        self.worldRecord = (_cached(cache, ("record", world_record), lambda: freeze(dict(world_record)))
                            if world_record is not None else None)

    @property
    def dimensions(self) -> Any:
        return self._state.dimensions

    def buffer(self, type: str, payload: Any) -> None:
        """The run's own world proposal, as it buffers it: later reads see it."""
        state = self._state.buffered(type, payload)
        if state is not None:
            object.__setattr__(self, "_state", state)

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, name):
            raise TypeError(f"ctx.world.{name} is read-only; propose a change instead")
        object.__setattr__(self, name, value)

    def wire_data(self) -> dict[str, Any]:
        """The view as plain values shared with the turn's other views, recording no read: for a caller that only
        encodes them (a sandboxed handler's ctx); never change them (as_data() gives a copy)."""
        return {**self._state.plain, "seats": self._seats_plain, "worldRecord": self._record_plain}

    def as_data(self) -> dict[str, Any]:
        """The view as plain values of the caller's own (a copy), recording no read."""
        return thaw(self.wire_data())

    def record_reads_into(self, reads: set[str]) -> None:
        """Reading characters or characterSchema adds the upstream runtimes that wrote them to `reads` (the reader's
        read dependencies: if their proposals do not commit, an auxiliary reader's do not either)."""
        object.__setattr__(self, "_reads", reads)

    def note_read(self, name: str) -> None:
        if self._reads is not None:
            self._reads.update(self.producers.get(name, ()))

    @property
    def characters(self) -> Any:
        self.note_read("characters")
        return self._state.characters

    @property
    def characterSchema(self) -> Any:
        self.note_read("characterSchema")
        return self._state.characterSchema


def _cached(cache: dict[Any, Any] | None, objects: tuple[Any, ...], build: Callable[[], T]) -> T:
    """`build()`, once per `objects` (compared by identity: the turn keeps them alive) in `cache`."""
    if cache is None:
        return build()
    key = tuple(map(id, objects))
    found = cache.get(key)
    if found is None or any(a is not b for a, b in zip(found[0], objects, strict=True)):
        found = cache[key] = (objects, build())
    value: T = found[1]
    return value


WORLD_PROPOSALS = (ProposalType.CHARACTER_SCHEMA_SET, ProposalType.CHARACTER_UPSERT, ProposalType.DIMENSION_INITIALIZE,
                   ProposalType.DIMENSION_UPDATE)


async def committed_world(store: store_pb2_grpc.TransactionalStoreStub, scope: ExecutionScope, shared: TurnShared) -> store_pb2.GetWorldResponse:
    """The world as the turn's lease read it, else read once per turn."""
    world = shared.world
    if world is None:
        read: store_pb2.GetWorldResponse = await shared.read_once(
            "world", lambda: store.GetWorld(store_pb2.GetWorldRequest(session_id=scope.session.id)))
        world = shared.world = read
    return world


async def world_view(store: store_pb2_grpc.TransactionalStoreStub, registry: registry_pb2_grpc.PluginRegistryStub | None,
                     scope: ExecutionScope, shared: TurnShared, *, upstream: bool = True) -> WorldView:
    """The execution's view: the committed world, with the turn's world proposals so far unless it sees no upstream
    (a nested run reads the committed world)."""
    proposals = [p for p in shared.proposals if p.type in WORLD_PROPOSALS] if upstream else []
    return WorldView(await committed_world(store, scope, shared), proposals, scope.session.seats,
                     world_record=await read_world_record(registry, scope, shared), cache=shared.world_states)
