"""What every `covel operator …` call shares: a channel presenting the operator's certificate, and how a refusal is
printed (covel_cli/refusals.py)."""

from __future__ import annotations

from typing import TextIO

import grpc

from covel_cli.launcher import client_security, configured_addrs
from covel_cli.refusals import refusal
from shared.grpc_client import open_channel
from shared.settings import DataDirSetting


def operator_channel(name: str, addr: str | None = None) -> grpc.aio.Channel:
    """A channel to service `name` presenting the operator's certificate."""
    return open_channel(addr or configured_addrs()[name], security=client_security(name, DataDirSetting().data_dir))


def refused(command: str, name: str, error: grpc.aio.AioRpcError, err: TextIO, addr: str | None = None) -> int:
    print(refusal(f"operator {command}", name, addr or configured_addrs()[name], error, DataDirSetting().data_dir), file=err)
    return 1
