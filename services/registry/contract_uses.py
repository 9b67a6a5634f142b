"""Across packages, at load: whether the contracts runtimes consume, and those packages declare they provide, are
backed: a consumed contract without a schema, a provider that only declares, and accepts-contract-unresolved.

- `contract-schema-unpublished` (warning): a runtime consumes a contract (an io.inputs binding or a schedule.needs /
  after entry) that no loaded package publishes a schema for (`contracts.<id>.schema`): its values are checked by
  nothing but the consumer's own `accepts`.
- `provides-not-produced` (warning): `provides` names a contract nothing of the package produces (a runtime's
  io.output.contract, a service, an extension, world data a contributes.data namespace accepts): no session gets a
  value from this provider.
- `accepts-contract-unresolved`: an input's `accepts: contract:<id>` that no loaded package publishes. Optional input:
  a warning, and its values are never injected at run time (they cannot be checked). Required input: an error, and
  the package does not load.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from services.registry.diagnostics import Diagnostic, Severity
from services.registry.loaded_package import LoadedPackage, PackageState
from services.registry.manifest_fields import KERNEL_EXTENSION_POINTS
from services.registry.manifest_reading import PLUGIN_FILE

# Contracts whose schema is the kernel's own (services/scheduler/contracts; character-actor@1 is the framework's).
KERNEL_PUBLISHED = frozenset({"narrative-engine@2", "character-actor@1"}) | KERNEL_EXTENSION_POINTS
CONTRACT_PREFIX = "contract:"


def _published(packages: Sequence[LoadedPackage]) -> set[str]:
    found = set(KERNEL_PUBLISHED)
    for package in packages:
        if package.loaded:
            found.update(contract for contract, decl in package.definition.get("contracts", {}).items()
                         if isinstance(decl, dict) and decl.get("schema"))
    return found


def _prefix(file: str) -> str:
    return "runtime." if file == PLUGIN_FILE else ""


def _consumed(manifest: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(contract, field path) of each contract the runtime reads or waits for."""
    for binding, spec in (manifest.get("io") or {}).get("inputs", {}).items():
        contract = (spec.get("from") or {}).get("contract")
        if contract:
            yield contract, f"io.inputs.{binding}.from.contract"
    schedule = manifest.get("schedule") or {}
    for key in ("needs", "after"):
        for index, entry in enumerate(schedule.get(key) or []):
            if isinstance(entry, dict) and entry.get("contract"):
                yield entry["contract"], f"schedule.{key}[{index}].contract"


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _produced(package: LoadedPackage) -> set[str]:
    """What the package gives a session a value of: runtime outputs, services, extensions, and the world data its
    contributes.data namespaces accept (a world's data source `to: contract:<id>` lands there)."""
    outputs = {((runtime.manifest.get("io") or {}).get("output") or {}).get("contract") for runtime in package.runtimes}
    data = ((package.definition.get("contributes") or {}).get("data") or {}).values()
    accepted = {contract for decl in data if isinstance(decl, dict) for contract in _listed(decl.get("accepts"))}
    return ({c for c in outputs if c} | accepted | set(package.services)
            | {extension.split("/", 1)[0] for extension in package.extensions})


def warning(package: LoadedPackage, code: str, message: str, file: str, field_path: str, hint: str) -> None:
    package.diagnostics.append(Diagnostic(severity=Severity.WARNING, code=code, message=message, file=file, field_path=field_path,
                                          hint=hint, plugin_id=package.id))


def _check_accepts(package: LoadedPackage, published: set[str]) -> None:
    for runtime in package.runtimes:
        for binding, spec in (runtime.manifest.get("io") or {}).get("inputs", {}).items():
            accepts = spec.get("accepts")
            if not isinstance(accepts, str) or not accepts.startswith(CONTRACT_PREFIX) or accepts[len(CONTRACT_PREFIX):] in published:
                continue
            path = f"{_prefix(runtime.file)}io.inputs.{binding}.accepts"
            if spec.get("required", True) is False:
                warning(package, "accepts-contract-unresolved", f"no loaded package publishes {accepts}: the optional input `{binding}` "
                      "is never given a value (it cannot be checked)", runtime.file, path,
                      "install the plugin that publishes the contract, or accept a local schema")
                continue
            package.diagnostics.append(Diagnostic(
                severity=Severity.ERROR, code="accepts-contract-unresolved",
                message=f"no loaded package publishes {accepts}, which the required input `{binding}` accepts", file=runtime.file,
                field_path=path, hint="install the plugin that publishes the contract, make the input required: false, or accept a local schema",
                plugin_id=package.id))
            package.state = PackageState.FAILED


def check_contract_uses(packages: Sequence[LoadedPackage]) -> None:
    published = _published(packages)
    for package in packages:
        if not package.loaded:
            continue
        _check_accepts(package, published)
        if not package.loaded:
            package.runtimes = []
            continue
        for runtime in package.runtimes:
            for contract, path in _consumed(runtime.manifest):
                if contract not in published:
                    warning(package, "contract-schema-unpublished", f"{contract} is consumed here, but no loaded package publishes its schema",
                          runtime.file, f"{_prefix(runtime.file)}{path}",
                          f"the provider should publish contracts.{contract}.schema; until then only this input's `accepts` checks it")
        produced = _produced(package)
        for index, contract in enumerate(package.provides):
            if contract not in produced and contract not in package.default_provides:
                warning(package, "provides-not-produced", f"provides names {contract}, but nothing of this package produces it",
                      PLUGIN_FILE, f"provides[{index}]",
                      "give a runtime io.output.contract, a service or an extension of it, or remove it from provides")
