"""Revisions of committed state a turn reads (opaque strings): a detached job that ran without the session's lease
sends back those it read, and its commit compares them with the state then (read_checks.py).

A plugin data scope's revision covers each entry's address, the turn that last wrote it and when (an operator's
write has no turn); the world's covers the character schema's version and each character's and dimension's."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from google.protobuf import timestamp_pb2

from covel.store.v1 import store_pb2
from services.store.proto_mapping import timestamp

_NEVER = timestamp_pb2.Timestamp()


def entries_revision(entries: Iterable[store_pb2.PluginDataEntry]) -> str:
    return _revision((entry.namespace, entry.key, entry.turn_id, entry.updated_at) for entry in entries)


def rows_revision(rows: Iterable[Any]) -> str:
    """entries_revision of plugin data rows (namespace, key, turn_id, updated_at), without their values."""
    return _revision((row.namespace, row.key, row.turn_id or "", timestamp(row.updated_at) or _NEVER) for row in rows)


def _revision(entries: Iterable[tuple[str, str, str, timestamp_pb2.Timestamp]]) -> str:
    digest = hashlib.blake2b(digest_size=12)
    for namespace, key, turn_id, stamp in entries:
        digest.update(f"{namespace}\0{key}\0{turn_id}\0{stamp.seconds}.{stamp.nanos}\n".encode())
    return digest.hexdigest()


def world_revision(schema_version: int, characters: Iterable[tuple[str, int]], dimensions: Iterable[tuple[str, int]]) -> str:
    """`characters` and `dimensions`: (id, version), ordered by id."""
    digest = hashlib.blake2b(digest_size=12)
    digest.update(f"schema {schema_version}\n".encode())
    for kind, rows in (("c", characters), ("d", dimensions)):
        for row_id, version in rows:
            digest.update(f"{kind} {row_id} {version}\n".encode())
    return digest.hexdigest()
