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
from pathlib import Path
from typing import Any

from covel.store.v1 import store_pb2
from shared.structs import from_struct, to_struct

_schemas: dict[tuple[str, int], dict[str, Any] | None] = {}


def _schema(path: Path) -> dict[str, Any] | None:
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except OSError:
        return None
    if key not in _schemas:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            _schemas[key] = loaded if isinstance(loaded, dict) else None
        except (OSError, ValueError):
            _schemas[key] = None
    return _schemas[key]


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
            schema = _schema(Path(package.root_dir) / str(declaration.get("schema") or "")) if declaration.get("schema") else None
            if schema is not None:
                policy.schema.CopyFrom(to_struct(schema))
            policies.append(policy)
    return policies
