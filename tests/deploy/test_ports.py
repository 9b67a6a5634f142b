"""Ports are exclusive: a server cannot bind a port another server listens on (gRPC's default
SO_REUSEPORT would let it, and split the port's connections between two services), and the
launcher starts again on new ports when one it picked turns out taken."""

from __future__ import annotations

import socket

import grpc
import pytest

from covel_cli.launcher import FreePorts, PortTaken, ServiceGroup, free_port_addrs
from shared.grpc_server import AddressInUse, start_server
from shared.settings import REPO_ROOT, ServiceSettings


def _no_services(server: grpc.aio.Server) -> list[str]:
    return []


async def test_a_second_server_cannot_bind_a_taken_port():
    first = await start_server("127.0.0.1:0", _no_services, settings=ServiceSettings())
    try:
        with pytest.raises(AddressInUse, match="could not bind"):
            await start_server(f"127.0.0.1:{first.port}", _no_services, settings=ServiceSettings())
    finally:
        await first.stop(0)


async def test_a_server_cannot_share_a_port_with_a_reuseport_server():
    # Another process' plain grpc server (SO_REUSEPORT on, gRPC's default) holds the port.
    foreign = grpc.aio.server()
    port = foreign.add_insecure_port("127.0.0.1:0")
    await foreign.start()
    try:
        with pytest.raises(AddressInUse):
            await start_server(f"127.0.0.1:{port}", _no_services, settings=ServiceSettings())
    finally:
        await foreign.stop(0)


async def test_the_health_port_is_exclusive_too():
    taken = await start_server("127.0.0.1:0", _no_services, settings=ServiceSettings())
    try:
        with pytest.raises(AddressInUse, match="health port"):
            await start_server("127.0.0.1:0", _no_services, service="registry",
                               settings=ServiceSettings(health_port=taken.port))
    finally:
        await taken.stop(0)


async def test_the_launcher_picks_new_ports_when_one_is_taken(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = f"127.0.0.1:{squatter.getsockname()[1]}"
        addrs = free_port_addrs()
        addrs["store"] = taken
        group = ServiceGroup(addrs, tmp_path, extra_env={"COVEL_PLUGIN_DIRS": str(REPO_ROOT / "plugins")})
        try:
            await group.start()
            assert group.addrs["store"] != taken
            assert all(process.returncode is None for process in group.processes.values())
        finally:
            await group.stop()
        assert "could not bind" in (tmp_path / "logs" / "store.stderr").read_text()


async def test_configured_addresses_are_not_changed(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        addrs = dict(free_port_addrs())  # not FreePorts: as `covel up` configures them
        addrs["store"] = f"127.0.0.1:{squatter.getsockname()[1]}"
        group = ServiceGroup(addrs, tmp_path, extra_env={"COVEL_PLUGIN_DIRS": str(REPO_ROOT / "plugins")})
        try:
            with pytest.raises(PortTaken):
                await group.start()
        finally:
            await group.stop()
    assert not isinstance(addrs, FreePorts)
