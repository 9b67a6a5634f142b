"""Bind a runtime's `io.inputs`: this turn's finished upstream results (scope: turn), the frozen
exports earlier turns recorded (scope: committed + recordAs), and kernel inputs.

Values are checked before they bind: a committed export against the public contract of its
producer, and every value against the consumer's `accepts`. An optional input whose value
fails is omitted (the consumer runs without it); a required one is reported so the caller
gates the runtime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from services.scheduler.catalogue import Package
from services.scheduler.contracts import NARRATIVE_ENGINE
from services.scheduler.execution.json_pointer import PointerError, resolve
from services.scheduler.execution.output_contracts import SchemaUnavailable, check_output, contract_schema, file_schema
from services.scheduler.execution.story_output import DERIVED_FIELDS
from shared.manifest import CompiledManifest, InputBinding, KernelInput
from shared.manifest.runtime import InputSource
from shared.plugin_sdk import json_copy


class Check(Protocol):
    """None, or what is wrong: `provider` sees each producer's whole value, `value` what binds."""

    def provider(self, binding: str, spec: InputBinding, full: Any) -> str | None: ...

    def value(self, binding: str, spec: InputBinding, value: Any) -> str | None: ...


@dataclass(frozen=True)
class Export:
    """One value a producer recorded under io.output.recordAs (the store's latest per name)."""

    plugin_id: str
    record_as: str
    runtime_id: str
    value: Any
    logical_turn: int = 0
    updated_at: float = 0.0


@dataclass
class CommittedExports:
    """The session's exports as the turn started, and which runtimes provide which contract."""

    exports: list[Export] = field(default_factory=list)
    # contract -> runtime ids of the session whose io.output.contract it is.
    contract_providers: Mapping[str, set[str]] = field(default_factory=dict)

    def matching(self, source: InputSource, record_as: str | None) -> list[Export]:
        if source.runtime:
            producers = {source.runtime}
        elif source.contract:
            producers = set(self.contract_providers.get(source.contract, ()))
        else:
            return []
        return [e for e in self.exports if e.runtime_id in producers and (not record_as or e.record_as == record_as)]


def _select(value: Any, pointer: str | None) -> tuple[bool, Any]:
    if not pointer:
        return True, value
    try:
        return True, resolve(value, pointer)
    except PointerError:
        return False, None


def bind_inputs(  # noqa: C901 -- the spec's binding rules in their order (scope, cardinality, select, accepts, required); issue 17 splits it
    manifest: CompiledManifest,
    outputs: Mapping[str, dict],
    providers: Mapping[str, list[str]],
    kernel: Mapping[str, Any] | None = None,
    *,
    committed: CommittedExports | None = None,
    check: Check | None = None,
    rejected: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """binding -> {"value": ...}; an input with no value is omitted (gating already ran for required ones).

    `cardinality: all` gives the providers' values sorted by runtime id. Kernel inputs
    (`from: {kernel: turn-digest@1}`) always have a value, frozen when the runtime starts.
    A value that fails `check` is left out and its problem put in `rejected`.
    """
    bound: dict[str, dict[str, Any]] = {}
    for binding, spec in manifest.io.inputs.items():
        if isinstance(spec, KernelInput):
            if kernel is not None and spec.from_.kernel in kernel:
                bound[binding] = {"value": json_copy(kernel[spec.from_.kernel])}
            continue
        source = spec.from_
        every = source.cardinality == "all"
        # (producer runtime id, full value, selected value) per provider with a value.
        found: list[tuple[str, Any, Any]] = []
        if spec.scope == "committed":
            if committed is None:
                continue
            exports = committed.matching(source, spec.record_as)
            if not every:
                exports = sorted(exports, key=lambda e: (e.logical_turn, e.updated_at))[-1:]
            found = [(e.runtime_id, e.value, e.value) for e in sorted(exports, key=lambda e: e.runtime_id)]
        else:
            if source.runtime:
                producers = [source.runtime] if source.runtime in outputs else []
            elif source.contract:
                producers = [p for p in providers.get(source.contract, []) if p in outputs]
            else:
                continue
            if not every:
                producers = producers[:1]
            for producer in sorted(producers) if every else producers:
                ok, value = _select(outputs[producer], spec.select)
                if ok:
                    found.append((producer, outputs[producer], value))
        if not found:
            continue
        if check is not None:
            problem = next((p for _, full, _ in found if (p := check.provider(binding, spec, full))), None)
            if problem is None:
                problem = check.value(binding, spec, [value for _, _, value in found] if every else found[0][2])
            if problem is not None:
                if rejected is not None:
                    rejected[binding] = problem
                continue
        if every:
            bound[binding] = {"value": [json_copy(value) for _, _, value in found]}
        else:
            bound[binding] = {"value": json_copy(found[0][2])}
    return bound


class InputChecker:
    """Checks input values against the consumer's `accepts` and, for committed exports, the public
    contract of the producer (a turn-scope value was checked at its producer's boundary)."""

    def __init__(self, consumer_root: Path, manifest_file: str, packages: Iterable[Package], producer_contracts: Mapping[str, str]) -> None:
        self._root = consumer_root
        self._manifest_file = manifest_file
        self._packages = list(packages)
        # runtime id -> its io.output.contract
        self._producer_contracts = producer_contracts

    def _published(self, contract: str) -> dict[str, Any] | None:
        """The contract's schema as some package of the session publishes it (or the kernel's)."""
        for package in self._packages:
            found = contract_schema(contract, package.contracts, Path(package.root_dir))
            if found is not None:
                return found
        return None

    def _accepts(self, reference: str) -> dict[str, Any]:
        if reference.startswith("contract:"):
            found = self._published(reference.removeprefix("contract:"))
            if found is None:
                raise SchemaUnavailable(f"accepts-contract-unresolved: no package in this session publishes {reference}")
            return found
        return file_schema(self._root, self._manifest_file, reference)

    def provider(self, binding: str, spec: InputBinding, full: Any) -> str | None:
        """A committed export is checked against its producer's public contract, `accepts` or not."""
        if spec.scope != "committed":
            return None
        contract = spec.from_.contract or self._producer_contracts.get(spec.from_.runtime or "")
        try:
            published = self._published(contract) if contract else None
        except SchemaUnavailable as error:
            return f"input {binding}: {error}"
        if contract == NARRATIVE_ENGINE and isinstance(full, dict):
            full = {key: value for key, value in full.items() if key not in DERIVED_FIELDS}
        problem = check_output(full, [(f"contract {contract}", published)]) if published is not None else None
        return f"input {binding}: the export fails {problem.removeprefix('output-schema-invalid ')}" if problem else None

    def value(self, binding: str, spec: InputBinding, value: Any) -> str | None:
        accepts = spec.accepts
        if not accepts:
            return None
        try:
            problem = check_output(value, [(accepts, self._accepts(accepts))])
        except SchemaUnavailable as error:
            return f"input {binding}: {error}"
        return f"input {binding}: {problem.replace('output-schema-invalid', 'input-schema-invalid', 1)}" if problem else None
