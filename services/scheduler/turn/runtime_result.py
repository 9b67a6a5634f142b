"""PostRuntime: what a hook's replaced result may change, and what the kernel keeps."""

from __future__ import annotations

from typing import Any

IDENTITY = ("pluginId", "runtimeId", "runId", "turnId")
WRITES = ("pendingProposals", "effects", "completion")


def apply_replaced_result(original: dict[str, Any], replaced: Any) -> dict[str, Any]:
    """The spec's PostRuntime rules, applied to a hook's `replace.result`.

    - identity (pluginId, runtimeId, runId, turnId) always stays the original's;
    - writes (pendingProposals, effects, completion) only ever come from the runtime; a
      changed status discards them all;
    - a changed output without a matching canonicalValue drops the old canonicalValue.
    The caller re-validates the output against the runtime's schema.
    """
    if not isinstance(replaced, dict):
        return original
    result = {**original, **{key: value for key, value in replaced.items() if key not in IDENTITY + WRITES}}
    for key in IDENTITY:
        if key in original:
            result[key] = original[key]
    if result.get("status") != original.get("status"):
        for key in WRITES:
            result[key] = [] if key == "pendingProposals" else None
        result["writesDiscarded"] = True
    else:
        for key in WRITES:
            if key in original:
                result[key] = original[key]
    output_changed = result.get("output") != original.get("output")
    canonical_changed = result.get("canonicalValue") != original.get("canonicalValue")
    if output_changed and not canonical_changed:
        result.pop("canonicalValue", None)
    return result
