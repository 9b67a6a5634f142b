"""`covel hooks info`: what the running hooks service has loaded, for both hook families.

Gateway event keys (with their delivery and who subscribes, unknown keys with their warning),
Python hookspec plugins and the events they map onto, and the 17 contract events' subscribers.
Exit status 0, or 1 when the hooks service cannot be reached.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

import grpc

from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel_cli.launcher import client_security, configured_addrs
from covel_cli.refusals import refusal
from shared.grpc_client import open_channel
from shared.settings import DataDirSetting, SecuritySettings


def render(keys: hooks_pb2.ListEventKeysResponse, contract: hooks_pb2.GetSubscriptionsResponse, out: TextIO) -> None:
    by_key: dict[str, list[str]] = {}
    for sub in keys.subscriptions:
        by_key.setdefault(sub.key, []).append(sub.plugin_id)
    print(f"Event keys (handlers loaded from registry generation {keys.generation}):", file=out)
    for key in keys.keys:
        delivery = key.delivery + (f" {key.budget_ms / 1000:g} s" if key.budget_ms else "")
        subscribers = ", ".join(by_key.get(key.key, [])) or "-"
        print(f"  {key.key:<24} {delivery:<12} {subscribers}", file=out)
        print(f"  {'':<24} fired at: {key.fired_at or 'not produced in this system'}", file=out)
    families = [sub for sub in keys.subscriptions if sub.kind == "family"]
    if families:
        print("Family subscriptions (every key of the family):", file=out)
        for sub in families:
            print(f"  {sub.key:<24} {sub.plugin_id}", file=out)
    unknown = [sub for sub in keys.subscriptions if sub.kind == "unknown"]
    if unknown:
        print("Unknown keys (registered, never emitted by the kernel):", file=out)
        for sub in unknown:
            print(f"  {sub.key:<24} {sub.plugin_id}: warning: {sub.warning}", file=out)
    if keys.hookspec_plugins:
        print("Python hookspec plugins:", file=out)
        for plugin in keys.hookspec_plugins:
            print(f"  {plugin.plugin_id}: {', '.join(plugin.hooks)} -> {', '.join(plugin.events) or 'tools only'}", file=out)
    print("Contract events:", file=out)
    for subscription in contract.subscriptions:
        print(f"  {subscription.event:<24} {', '.join(subscription.plugin_ids)}", file=out)
    for error in contract.load_errors:
        print(f"  error: {error.plugin_id}: {error.message}", file=out)


async def info(addr: str, out: TextIO = sys.stdout, err: TextIO = sys.stderr, *, security: SecuritySettings | None = None) -> int:
    """`security`: default, the operator's certificate (covel_cli/launcher.py client_security)."""
    channel = open_channel(addr, security=security or client_security("hooks", DataDirSetting().data_dir))
    try:
        stub = hooks_pb2_grpc.HookDispatcherStub(channel)
        keys = await stub.ListEventKeys(hooks_pb2.ListEventKeysRequest())
        contract = await stub.GetSubscriptions(hooks_pb2.GetSubscriptionsRequest())
    except grpc.aio.AioRpcError as error:
        print(refusal("hooks info", "hooks", addr, error, DataDirSetting().data_dir), file=err)
        return 1
    finally:
        await channel.close()
    render(keys, contract, out)
    return 0


async def command(args: argparse.Namespace) -> int:
    return await info(args.addr or configured_addrs()["hooks"])


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hooks = commands.add_parser("hooks", help="inspect the hooks service")
    actions = hooks.add_subparsers(dest="hooks_command", required=True)
    info_cmd = actions.add_parser("info", help="event keys and their subscribers, hookspec plugins, contract events")
    info_cmd.add_argument("--addr", help="hooks service address (default: COVEL_HOOKS_ADDR)")
    info_cmd.set_defaults(run=command)
