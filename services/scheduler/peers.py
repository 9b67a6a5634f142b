"""Stubs of the four services the scheduler calls during a turn."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc

from covel.hooks.v1 import hooks_pb2_grpc
from covel.registry.v1 import registry_pb2_grpc
from covel.store.v1 import store_pb2_grpc
from services.scheduler.turn_gateway import TurnGateway
from shared.grpc_client import open_channel
from shared.settings import PeerAddresses, SecuritySettings


@dataclass
class Peers:
    registry: registry_pb2_grpc.PluginRegistryStub
    hooks: hooks_pb2_grpc.HookDispatcherStub
    gateway: TurnGateway
    store: store_pb2_grpc.TransactionalStoreStub
    channels: list[grpc.aio.Channel]

    @classmethod
    def connect(cls, addresses: PeerAddresses) -> Peers:
        # TLS as the service's own settings say (they may be given in code, not only by the environment).
        security = addresses if isinstance(addresses, SecuritySettings) else None
        channels = {name: open_channel(addresses.addr_of(name), security=security) for name in ("registry", "hooks", "gateway", "store")}
        return cls(
            registry=registry_pb2_grpc.PluginRegistryStub(channels["registry"]),
            hooks=hooks_pb2_grpc.HookDispatcherStub(channels["hooks"]),
            gateway=TurnGateway(channels["gateway"]),
            store=store_pb2_grpc.TransactionalStoreStub(channels["store"]),
            channels=list(channels.values()),
        )

    async def connected(self, timeout_s: float) -> list[str]:
        """Wait until every peer channel is connected; the peers still unreachable after `timeout_s`.

        Before it announces itself ready: a channel that tried a peer not yet up sits in reconnect
        backoff, and every call on it fails at once with UNAVAILABLE until it reconnects."""
        names = ("registry", "hooks", "gateway", "store")
        waits = {name: asyncio.ensure_future(channel.channel_ready()) for name, channel in zip(names, self.channels, strict=True)}
        _, pending = await asyncio.wait(waits.values(), timeout=timeout_s)
        for wait in pending:
            wait.cancel()
        return [name for name, wait in waits.items() if wait in pending]

    def failing(self) -> list[str]:
        """The peers whose channel is failing to connect now (TRANSIENT_FAILURE): no RPC is made to ask."""
        names = ("registry", "hooks", "gateway", "store")
        return [name for name, channel in zip(names, self.channels, strict=True)
                if channel.get_state(try_to_connect=True) == grpc.ChannelConnectivity.TRANSIENT_FAILURE]

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()
