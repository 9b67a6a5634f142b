"""`covel operator plugin-data put|delete`: the operator's override of one plugin-data record
(AdminPutPluginData / AdminDeletePluginData; docs/operations.md, "Overriding plugin data")."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import TextIO

import grpc

from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.operator_calls import operator_channel, refused
from shared.structs import from_value, to_value


async def put_data(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    try:
        value = json.loads(args.value)
    except json.JSONDecodeError as error:
        print(f"covel operator plugin-data put: the value is not JSON ({error})", file=err)
        return 2
    request = store_pb2.AdminPutPluginDataRequest(
        session_id=args.session,
        plugin_id=args.plugin,
        namespace=args.namespace,
        key=args.key,
        value=to_value(value),
        operator=args.operator,
        reason=args.reason,
    )
    async with operator_channel("store", args.addr) as channel:
        try:
            entry = (await store_pb2_grpc.TransactionalStoreStub(channel).AdminPutPluginData(request)).entry
        except grpc.aio.AioRpcError as error:
            return refused("plugin-data put", "store", error, err, args.addr)
    print(
        f"{entry.plugin_id} {entry.namespace}/{entry.key} = {json.dumps(from_value(entry.value), ensure_ascii=False)}", file=out
    )
    return 0


async def delete_data(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    request = store_pb2.AdminDeletePluginDataRequest(
        session_id=args.session,
        plugin_id=args.plugin,
        namespace=args.namespace,
        key=args.key,
        operator=args.operator,
        reason=args.reason,
    )
    async with operator_channel("store", args.addr) as channel:
        try:
            entry = (await store_pb2_grpc.TransactionalStoreStub(channel).AdminDeletePluginData(request)).entry
        except grpc.aio.AioRpcError as error:
            return refused("plugin-data delete", "store", error, err, args.addr)
    print(
        f"{entry.plugin_id} {entry.namespace}/{entry.key} deleted (was {json.dumps(from_value(entry.value), ensure_ascii=False)})",
        file=out,
    )
    return 0


def add_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> list[argparse.ArgumentParser]:
    data = actions.add_parser(
        "plugin-data", help="override one plugin-data record of a session (past its dataset's schema; audited)"
    )
    verbs = data.add_subparsers(dest="plugin_data_command", required=True)
    put_cmd = verbs.add_parser("put", help="create or replace a record")
    delete_cmd = verbs.add_parser("delete", help="remove a record")
    for each in (put_cmd, delete_cmd):
        for name in ("session", "plugin", "namespace", "key"):
            each.add_argument(name)
    put_cmd.add_argument("value", help="the record's value as JSON")
    for each in (put_cmd, delete_cmd):
        each.add_argument(
            "--operator", default=getpass.getuser(), help="who writes, for the audit log (default: your login name)"
        )
        each.add_argument("--reason", default="", help="why, for the audit log")
    put_cmd.set_defaults(run=put_data)
    delete_cmd.set_defaults(run=delete_data)
    return [put_cmd, delete_cmd]
