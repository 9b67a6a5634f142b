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
from services.scheduler.catalogue import Package
from services.scheduler.kinds import ProposalType
from shared.manifest.runtime import Dataset
from shared.structs import to_struct


@lru_cache(maxsize=256)
def _load(path: str, mtime_ns: int) -> dict[str, Any] | None:
    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def package_json(package_root: str, relative: str) -> dict[str, Any] | None:
    """A JSON object file of a package (a schema it names), read once per file version; None when the file is
    missing or not a JSON object."""
    if not package_root:
        return None
    path = Path(package_root) / relative
    try:
        return _load(str(path), path.stat().st_mtime_ns)
    except OSError:
        return None


def dataset_schema(package_root: str, declaration: Dataset) -> dict[str, Any] | None:
    """The record schema a dataset declaration names (`schema`, relative to the package)."""
    return package_json(package_root, declaration.schema_)


def dataset_policies(packages: Mapping[str, Package], proposals: Iterable[store_pb2.Proposal]) -> list[store_pb2.DatasetPolicy]:
    writers = sorted({p.plugin_id for p in proposals if p.type.startswith(ProposalType.PLUGIN_DATA)})
    return policies_of(packages[plugin_id] for plugin_id in writers if plugin_id in packages)


def policies_of(packages: Iterable[Package]) -> list[store_pb2.DatasetPolicy]:
    """Every dataset of these packages as the store enforces it (a world's data import uses them too). The messages
    are shared (built once per schema file version): callers put them in a request, which copies them."""
    return [_policy(package.id, namespace, tuple(declaration.ops), dataset_schema(package.root_dir, declaration))
            for package in packages for namespace, declaration in (package.contributes.datasets or {}).items()]


# (plugin, namespace, ops, id(schema)) -> (the schema, its policy): a commit's policies were converted to Structs
# at every commit; the schema is _load's (kept while its file is unchanged), found by identity.
_POLICIES: dict[tuple[str, str, tuple[str, ...], int], tuple[dict[str, Any] | None, store_pb2.DatasetPolicy]] = {}
_POLICIES_KEPT = 512


def _policy(plugin_id: str, namespace: str, ops: tuple[str, ...], schema: dict[str, Any] | None) -> store_pb2.DatasetPolicy:
    key = (plugin_id, namespace, ops, id(schema))
    found = _POLICIES.get(key)
    if found is None or found[0] is not schema:
        if len(_POLICIES) >= _POLICIES_KEPT:
            _POLICIES.clear()
        policy = store_pb2.DatasetPolicy(plugin_id=plugin_id, namespace=namespace, ops=list(ops))
        if schema is not None:
            policy.schema.CopyFrom(to_struct(schema))
        found = _POLICIES[key] = (schema, policy)
    return found[1]
