"""Bind a runtime's `io.inputs` from this turn's finished upstream results (scope: turn)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.json_pointer import PointerError, resolve
from shared.plugin_sdk import json_copy


def _select(value: Any, pointer: str | None) -> tuple[bool, Any]:
    if not pointer:
        return True, value
    try:
        return True, resolve(value, pointer)
    except PointerError:
        return False, None


def bind_inputs(
    manifest: Mapping[str, Any],
    outputs: Mapping[str, dict],
    providers: Mapping[str, list[str]],
    kernel: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """binding -> {"value": ...}; an input with no value is omitted (gating already ran for required ones).

    `cardinality: all` gives the providers' values sorted by runtime id. Kernel inputs
    (`from: {kernel: turn-digest@1}`) always have a value, frozen when the runtime starts.
    """
    bound: dict[str, dict[str, Any]] = {}
    for binding, spec in ((manifest.get("io") or {}).get("inputs") or {}).items():
        if not isinstance(spec, Mapping):
            continue
        source = spec.get("from") or {}
        if source.get("kernel"):
            if kernel is not None and source["kernel"] in kernel:
                bound[binding] = {"value": json_copy(kernel[source["kernel"]])}
            continue
        if (spec.get("scope") or "turn") != "turn":
            continue
        if source.get("runtime"):
            producers = [source["runtime"]] if source["runtime"] in outputs else []
        elif source.get("contract"):
            producers = [p for p in providers.get(source["contract"], []) if p in outputs]
        else:
            continue
        if not producers:
            continue
        pointer = spec.get("select")
        if source.get("cardinality") == "all":
            values = []
            for producer in sorted(producers):
                found, value = _select(outputs[producer], pointer)
                if found:
                    values.append(json_copy(value))
            bound[binding] = {"value": values}
            continue
        found, value = _select(outputs[producers[0]], pointer)
        if found:
            bound[binding] = {"value": json_copy(value)}
    return bound
