"""The dataset declarations (contributes.datasets) the store enforces at commit.

The store reads no plugin folders: CommitTurn carries a DatasetPolicy (plugin, namespace, record
schema, allowed operations) for each dataset of each plugin that writes plugin data in the
commit, so a write that does not fit its dataset is rejected there and its unit rolls back. A
declared dataset whose schema file cannot be read gets a policy without a schema, which the
store answers by rejecting every write to it (fail closed).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from covel.store.v1 import store_pb2
from shared.structs import from_struct, to_struct


@lru_cache(maxsize=256)
def _load(path: str, mtime_ns: int) -> dict[str, Any] | None:
    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def dataset_schema(package_root: str, declaration: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record schema a dataset declaration names (`schema`, relative to the package), read once
    per file version; None when it names none or the file is missing or not a JSON object."""
    reference = declaration.get("schema")
    if not isinstance(reference, str) or not reference or not package_root:
        return None
    path = Path(package_root) / reference
    try:
        return _load(str(path), path.stat().st_mtime_ns)
    except OSError:
        return None


def dataset_policies(packages: Mapping[str, Any], proposals: Iterable[store_pb2.Proposal]) -> list[store_pb2.DatasetPolicy]:
    writers = sorted({p.plugin_id for p in proposals if p.type.startswith("plugin.data")})
    policies = []
    for plugin_id in writers:
        package = packages.get(plugin_id)
        if package is None:
            continue
        declared = (from_struct(package.definition).get("contributes") or {}).get("datasets") or {}
        for namespace, declaration in declared.items():
            if not isinstance(declaration, dict):
                continue
            policy = store_pb2.DatasetPolicy(plugin_id=plugin_id, namespace=namespace,
                                             ops=[str(op) for op in declaration.get("ops") or []])
            schema = dataset_schema(package.root_dir, declaration)
            if schema is not None:
                policy.schema.CopyFrom(to_struct(schema))
            policies.append(policy)
    return policies
