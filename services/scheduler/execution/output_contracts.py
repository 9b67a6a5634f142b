"""Check a runtime's output at its boundary against its schema and its contract's published schema.

Sources: `io.output.schema` (a path next to the manifest, or `contract:<id>`), and the schema
the package publishes for its output contract (`contracts.<id>.schema`). Kernel contracts
(narrative-engine@2) are the kernel's own files. Story runtimes are shaped by the story
rules instead (execution/story_output.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from services.scheduler.contracts import kernel_contract_schema
from shared import json_schemas
from shared.manifest import CompiledManifest
from shared.manifest.package import ContractSchema

MAX_REPORTED_ERRORS = 3


class SchemaUnavailable(ValueError):
    pass


@lru_cache(maxsize=256)
def _load(path: str, mtime: float) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


@lru_cache(maxsize=1024)
def _resolved(root: Path, manifest_file: str, reference: str) -> Path | None:
    """The schema file's real path, None when it points outside the package: resolved once per reference (each
    check of a runtime's output asked the file system for every folder of the path); the file's mtime is still
    read at each load, so an edited schema is read again."""
    path = ((root / manifest_file).parent / reference).resolve()
    return path if path.is_relative_to(root.resolve()) else None


def file_schema(root: Path, manifest_file: str, reference: str) -> dict[str, Any]:
    path = _resolved(root, manifest_file, reference)
    if path is None:
        raise SchemaUnavailable(f"{reference} points outside the package")
    try:
        return _load(str(path), path.stat().st_mtime)
    except (OSError, json.JSONDecodeError) as error:
        raise SchemaUnavailable(f"{reference}: {error}") from error


def contract_schema(contract: str, contracts: Mapping[str, ContractSchema], root: Path) -> dict[str, Any] | None:
    """The contract's schema: the kernel's own, or the one `contracts` (a package's) publishes."""
    kernel = kernel_contract_schema(contract)
    if kernel is not None:
        return kernel
    published = contracts.get(contract)
    if published is not None:
        return file_schema(root, "PLUGIN.md", published.schema_)
    return None


def output_schemas(manifest: CompiledManifest, contracts: Mapping[str, ContractSchema], root: Path) -> list[tuple[str, dict[str, Any]]]:
    """(label, schema) pairs the output must satisfy; `contracts` and `root` are the runtime's package's."""
    output = manifest.io.output
    schemas: list[tuple[str, dict[str, Any]]] = []
    reference = output.schema_
    if reference:
        if reference.startswith("contract:"):
            found = contract_schema(reference.removeprefix("contract:"), contracts, root)
            if found is None:
                raise SchemaUnavailable(f"io.output.schema: {reference} has no published schema")
            schemas.append((reference, found))
        else:
            schemas.append((reference, file_schema(root, manifest.file, reference)))
    contract = output.contract
    if contract:
        published = contract_schema(contract, contracts, root)
        if published is not None and all(schema is not published for _, schema in schemas):
            schemas.append((f"contract {contract}", published))
    return schemas


def check_output(value: Any, schemas: list[tuple[str, dict[str, Any]]]) -> str | None:
    """None when `value` fits every schema; else an output-schema-invalid reason naming the first errors."""
    for label, schema in schemas:
        errors = sorted(_validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            listed = "; ".join(
                f"{'/' + '/'.join(str(p) for p in error.absolute_path) if error.absolute_path else '(root)'}: {error.message}"
                for error in errors[:MAX_REPORTED_ERRORS]
            )
            return f"output-schema-invalid ({label}): {listed}"
    return None


# id(schema) -> (the schema, its validator). The schemas checked here are the loaded files' (_load keeps them while
# the file is unchanged) and the kernel's: never changed, so found by identity without writing them out as JSON
# (json_schemas.validator's key) at every check. A schema seen first gets json_schemas' compiled validator.
_VALIDATORS: dict[int, tuple[dict[str, Any], Any]] = {}
_VALIDATORS_KEPT = 512


def _validator(schema: dict[str, Any]) -> Any:
    found = _VALIDATORS.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_VALIDATORS) >= _VALIDATORS_KEPT:
            _VALIDATORS.clear()
        found = _VALIDATORS[id(schema)] = (schema, json_schemas.validator(schema, draft_from_schema=False))
    return found[1]
