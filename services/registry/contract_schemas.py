"""Across packages: every provider of a contract publishes the same schema for it.

A package's `contracts.<id>.schema` (a local JSON file) is compared with the one the first
loaded package of the catalogue published for that id; a different document fails the later
package, since consumers validate one public schema per contract.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from services.registry.diagnostics import Diagnostic, Severity
from services.registry.loaded_package import LoadedPackage, PackageState
from services.registry.manifest_reading import PLUGIN_FILE
from services.registry.package_files import CONTRACT_SCHEMA_PREFIX, PackageFiles


def _published(package: LoadedPackage) -> dict[str, Any]:
    files = PackageFiles(package.root_dir)
    published: dict[str, Any] = {}
    for contract, decl in package.definition.get("contracts", {}).items():
        written = decl.get("schema")
        if not isinstance(written, str) or written.startswith(CONTRACT_SCHEMA_PREFIX):
            continue
        relative = files.relative(PLUGIN_FILE, written)
        if relative is None or not files.is_file(relative):
            continue
        try:
            published[contract] = json.loads((package.root_dir / relative).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
    return published


def check_contract_schemas(packages: Sequence[LoadedPackage]) -> None:
    first: dict[str, tuple[str, Any]] = {}
    for package in packages:
        if not package.loaded:
            continue
        for contract, document in _published(package).items():
            if contract not in first:
                first[contract] = (package.id, document)
                continue
            owner, expected = first[contract]
            if document != expected:
                package.diagnostics.append(
                    Diagnostic(
                        severity=Severity.ERROR,
                        code="contract-schema-divergent",
                        message=f"the schema published for {contract} differs from the one `{owner}` publishes; a contract has one public schema",
                        file=PLUGIN_FILE,
                        field_path=f"contracts.{contract}.schema",
                        hint=f"publish the same schema as `{owner}`, or use a new contract id",
                        plugin_id=package.id,
                    )
                )
                package.state = PackageState.FAILED
                package.runtimes = []
