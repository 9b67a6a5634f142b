"""The scheduler's public gRPC service: what clients in any language call. Wiring only: the collaborators
built in one place (`compose`), the servicer composed of the api/ modules (one per resource), the server started."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import cast

import grpc

from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2_grpc
from services.scheduler.agent.context import configure_instruction_locale
from services.scheduler.api.actions import Actions
from services.scheduler.api.admission import SubmitAdmission
from services.scheduler.api.advance_chains import AdvanceChains
from services.scheduler.api.interactions import Interactions
from services.scheduler.api.jobs import Jobs
from services.scheduler.api.lorebook import Lorebook
from services.scheduler.api.media import Media
from services.scheduler.api.plugins import Plugins
from services.scheduler.api.running_packages import RunningPackages
from services.scheduler.api.seat_invites import SeatInvites
from services.scheduler.api.seats import Seats
from services.scheduler.api.session_creation import SessionCreation
from services.scheduler.api.sessions import Sessions
from services.scheduler.api.settlements import Settlements
from services.scheduler.api.story_moves import StoryMoves
from services.scheduler.api.submit import Submissions
from services.scheduler.api.turn_follow import TurnFollower
from services.scheduler.api.turn_signals import TurnSignals
from services.scheduler.api.turn_stream import TurnStreams
from services.scheduler.api.turns import Turns
from services.scheduler.api.world_generator import WorldGenerator
from services.scheduler.api.world_sync import WorldSync
from services.scheduler.api.worlds import Worlds
from services.scheduler.detached.worker import DetachedWorker
from services.scheduler.hooks.bus import HookBus
from services.scheduler.hooks.event_keys import SchedulerEventKeys, public_cfg, restart
from services.scheduler.known_sessions import KnownSessions
from services.scheduler.peers import Peers
from services.scheduler.plugin_cache import PluginCache
from services.scheduler.session_access import SessionAccess
from services.scheduler.settings import SchedulerSettings
from services.scheduler.turn.runner import TurnRunner
from shared.grpc_client import open_channel
from shared.grpc_server import RunningServer, start_server
from shared.logs import get_logger
from shared.security.auth import client_api_interceptors
from shared.telemetry.tracing import configure_tracing

log = get_logger(component="scheduler")
RPCS = tuple(scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"].methods_by_name)


class SchedulerService:
    """covel.scheduler.v1.Scheduler, each RPC served by the one part (an api/ module's) that defines it: every
    method of the service is an attribute (checked here), what add_SchedulerServicer_to_server reads."""

    def __init__(self, *parts: object) -> None:
        for name in RPCS:
            serving = [part for part in parts if hasattr(part, name)]
            if len(serving) != 1:
                raise TypeError(f"Scheduler.{name} is served by {len(serving)} parts; it needs exactly one")
            setattr(self, name, getattr(serving[0], name))


@dataclass(frozen=True)
class Scheduler:
    """The scheduler's objects, built in one place (`compose`), each given its collaborators."""

    service: SchedulerService
    runner: TurnRunner
    events: SchedulerEventKeys
    plugins: PluginCache
    streams: TurnStreams


def compose(peers: Peers, settings: SchedulerSettings) -> Scheduler:
    # Gateway event keys (hooks/event_keys.py); the bus carries them to context assembly and compaction.
    sessions = KnownSessions()
    events = SchedulerEventKeys(peers.hooks, peers.store, public_cfg(settings), sessions=sessions)
    hooks = HookBus(peers.hooks, events)
    plugins = PluginCache(peers.registry)
    runner = TurnRunner(peers, plugins, hooks, settings, sessions)
    store = peers.store
    streams = TurnStreams(runner, events, batch_interval_s=settings.scheduler_stream_batch_ms / 1000)
    follower = TurnFollower(store, streams.watch)
    # Cancel stops the auto-advance chains of the submits running here.
    chains = AdvanceChains()
    # A submit meeting a running turn: queued, steered into it or refused (admit_message hookspecs).
    admission = SubmitAdmission(store, hooks, runner)
    submissions = Submissions(store, admission, events, streams, follower, chains, settings.scheduler_max_auto_advance)
    running_packages = RunningPackages(store, plugins)
    service = SchedulerService(
        Sessions(store, SessionCreation(peers, plugins, hooks, events), hooks, runner, peers.registry),
        Turns(store, submissions, streams, follower, running_packages),
        TurnSignals(store, runner, chains, events),
        Interactions(store, submissions, streams),
        Settlements(store, runner),
        Actions(store, runner, running_packages),
        Seats(store, running_packages),
        SeatInvites(store, follower, streams.watch),
        Plugins(peers, plugins, running_packages, events, hooks),
        Worlds(peers.registry),
        Lorebook(store),
        WorldSync(store, peers.registry, plugins),
        WorldGenerator(peers.registry, peers.gateway),
        Jobs(store),
        StoryMoves(store, streams),
        Media(store, peers.registry, running_packages),
    )
    return Scheduler(service, runner, events, plugins, streams)


# How long a starting scheduler waits for its peers to be connected before it announces itself
# ready (`covel up` and the tests start all five at once); it serves anyway after that.
PEERS_START_WAIT_S = 10.0
# How often readiness looks at the peer channels (their state: no RPC).
PEERS_READINESS_S = 5.0


async def start(settings: SchedulerSettings) -> RunningServer:
    # Before the peer channels open, so they carry the trace context.
    configure_tracing("scheduler", settings)
    configure_instruction_locale(settings.instruction_locale)
    peers = Peers.connect(settings)
    scheduler = compose(peers, settings)
    service, in_flight = scheduler.service, scheduler.streams.in_flight

    def add(server: grpc.aio.Server) -> list[str]:
        scheduler_pb2_grpc.add_SchedulerServicer_to_server(cast(scheduler_pb2_grpc.SchedulerServicer, service), server)
        return [scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"].full_name]

    running = await start_server(
        settings.scheduler_addr, add, settings=settings, service="scheduler",
        interceptors=client_api_interceptors(settings, authorize=SessionAccess(peers.store).check),
    )

    # SIGTERM (RunningServer.stop, one budget: COVEL_SCHEDULER_DRAIN_S, passed by __main__): health
    # NOT_SERVING; gateway:shutdown (and pre-restart on SIGHUP) hooks; then together, sharing the
    # time left: in-flight RPCs, turns in flight (they outlive a client that went away) and the
    # detached jobs running; last, the channels close.
    async def drain_turns(left_s: float) -> None:
        if in_flight:
            _, unfinished = await asyncio.wait(set(in_flight), timeout=left_s)
            if unfinished:
                log.warning("scheduler.drain_incomplete", turns_in_flight=len(unfinished), drain_s=settings.scheduler_drain_s)

    # gateway:startup once serving (not delaying the bind).
    scheduler.events.startup(settings)
    following = asyncio.create_task(scheduler.plugins.follow_catalogue())

    async def stop_following() -> None:
        following.cancel()

    running.on_stopped.append(stop_following)
    restart.listen()
    running.on_shutdown.append(scheduler.events.shutting_down)
    # -- detached jobs: this replica's workers claim from the store's queue (detached/worker.py)
    # Its own channel to the store: polling before the store is up must not put the turns' channel in reconnect backoff.
    queue_channel = open_channel(settings.store_addr, security=settings, own_connection=True)
    detached = DetachedWorker(store_pb2_grpc.TransactionalStoreStub(queue_channel), scheduler.runner, settings)
    detached.start()
    # Finished within the time left, or released back to the queue for another replica.
    running.on_drain.append(detached.stop)
    running.on_stopped.append(queue_channel.close)
    # -- end detached jobs
    running.on_drain.append(drain_turns)
    running.on_stopped.append(peers.close)
    if unreachable := await peers.connected(PEERS_START_WAIT_S):
        log.warning("scheduler.peers_unreachable", peers=unreachable, waited_s=PEERS_START_WAIT_S)

    async def peers_reachable() -> bool:
        return not peers.failing()

    # Readiness follows the peers a turn needs: one failing to connect takes the pod out of its Service.
    running.watch_readiness(peers_reachable, PEERS_READINESS_S, "peers")
    return running
