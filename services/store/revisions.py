"""Revisions of committed state a turn reads (opaque strings): a detached job that ran without the session's lease
sends back those it read, and its commit compares them with the state then (read_checks.py).

A plugin data scope's revision covers each entry's address, the turn that last wrote it and when (an operator's
write has no turn); the world's covers the character schema's version and each character's and dimension's."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from covel.store.v1 import store_pb2


def entries_revision(entries: Iterable[store_pb2.PluginDataEntry]) -> str:
    digest = hashlib.blake2b(digest_size=12)
    for entry in entries:
        stamp = entry.updated_at
        digest.update(f"{entry.namespace}\0{entry.key}\0{entry.turn_id}\0{stamp.seconds}.{stamp.nanos}\n".encode())
    return digest.hexdigest()


def world_revision(schema_version: int, characters: Iterable[tuple[str, int]], dimensions: Iterable[tuple[str, int]]) -> str:
    """`characters` and `dimensions`: (id, version), ordered by id."""
    digest = hashlib.blake2b(digest_size=12)
    digest.update(f"schema {schema_version}\n".encode())
    for kind, rows in (("c", characters), ("d", dimensions)):
        for row_id, version in rows:
            digest.update(f"{kind} {row_id} {version}\n".encode())
    return digest.hexdigest()
