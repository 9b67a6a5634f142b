"""io.payloadSchema: the schema a manual runtime's activation payload must satisfy, checked before the runtime runs
(RunManual's payload, ctx.recursive_call's input). The schema is a package file next to the manifest, `contract:<id>`,
or inline. An event follower's activation ({events}) is not checked here: each event's payload was checked against
its topic's schema (contributes.events) when it was emitted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.scheduler.catalogue import Package, Runtime
from services.scheduler.execution.output_contracts import MAX_REPORTED_ERRORS, SchemaUnavailable, contract_schema, file_schema
from shared import json_schemas


def payload_schema(runtime: Runtime, package: Package) -> dict[str, Any] | None:
    """The runtime's io.payloadSchema as a schema, or None when it declares none; SchemaUnavailable when it cannot be read."""
    declared = runtime.manifest.io.payload_schema
    if declared is None:
        return None
    if isinstance(declared, dict):
        return declared
    root = Path(package.root_dir)
    if declared.startswith("contract:"):
        found = contract_schema(declared.removeprefix("contract:"), package.contracts, root)
        if found is None:
            raise SchemaUnavailable(f"io.payloadSchema: {declared} has no published schema")
        return found
    return file_schema(root, runtime.manifest.file, declared)


def payload_problem(runtime: Runtime, package: Package, payload: Any) -> str | None:
    """None when `payload` fits the runtime's io.payloadSchema (or it declares none); else what is wrong, path by path."""
    try:
        schema = payload_schema(runtime, package)
    except SchemaUnavailable as error:
        return f"its io.payloadSchema cannot be read ({error}); the plugin's author must fix it"
    if schema is None:
        return None
    errors = sorted(json_schemas.validator(schema).iter_errors(payload), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    listed = "; ".join(f"{'/' + '/'.join(map(str, e.absolute_path)) if e.absolute_path else '(root)'}: {e.message}"
                       for e in errors[:MAX_REPORTED_ERRORS])
    return f"does not match {runtime.runtime_id}'s io.payloadSchema: {listed}"
