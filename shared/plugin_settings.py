"""The value rules of plugin settings (`contributes.settings[]`: key, type, options, min, max,
default), shared by the registry (a declaration's own default must pass them) and the scheduler
(the player's values at CreateSession must pass them).

- `select`: one of `options` (plain values, or `{value, label}` objects);
- `text`, `textarea`, `slot`: a string;
- `integer`: a whole number (protobuf Struct numbers arrive as floats: 3.0 counts), in `min`..`max`;
- `slider`, `number`: a number in `min`..`max`;
- `boolean`, `toggle`, `checkbox`: true or false.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

STRING_TYPES = frozenset({"text", "textarea", "slot"})
BOOLEAN_TYPES = frozenset({"boolean", "toggle", "checkbox"})
NUMBER_TYPES = frozenset({"slider", "number"})


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # a Struct number: 5, not 5.0
    return json.dumps(value, ensure_ascii=False)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _bounds(low: Any, high: Any) -> str:
    """min..max in words; at least one of them is set (declarations are unchecked JSON, hence Any)."""
    if low is not None and high is not None:
        return f"between {_number(low)} and {_number(high)}"
    return f"at least {_number(low)}" if low is not None else f"at most {_number(high)}"


def _same(option: Any, value: Any) -> bool:
    """Equal as JSON values: true is not 1, and 2 equals 2.0 (Struct numbers are floats)."""
    if isinstance(option, bool) or isinstance(value, bool):
        return isinstance(option, bool) and isinstance(value, bool) and option == value
    if isinstance(option, int | float) and isinstance(value, int | float):
        return option == value
    return type(option) is type(value) and option == value


def option_value(option: Any) -> Any:
    """A select option is a plain value or `{value, label}` (the label is only shown)."""
    if isinstance(option, Mapping) and "value" in option:
        return option["value"]
    return option


def declared_settings(definition: Mapping[str, Any]) -> dict[str, Mapping[str, Any]] | None:
    """key -> declaration of a package's contributes.settings; None when it declares none."""
    declared = (definition.get("contributes") or {}).get("settings")
    if not isinstance(declared, list):
        return None
    return {item["key"]: item for item in declared if isinstance(item, Mapping) and isinstance(item.get("key"), str)}


def value_problem(declaration: Mapping[str, Any], value: Any) -> str:
    """What is wrong with `value` for this declaration ("" when nothing is)."""
    kind = declaration.get("type")
    default = declaration.get("default")
    fallback = f"leave it out to use the default ({_shown(default)})" if default is not None else "leave it out"
    if kind == "select":
        options = [option_value(option) for option in declaration.get("options") or []]
        if not any(_same(option, value) for option in options):
            listed = ", ".join(str(option) for option in options)
            return f"must be one of {listed}, not {_shown(value)}; pick one of them or {fallback}"
        return ""
    if kind in STRING_TYPES:
        return "" if isinstance(value, str) else f"must be a string, not {_shown(value)}; send text or {fallback}"
    if kind in BOOLEAN_TYPES:
        return "" if isinstance(value, bool) else f"must be true or false, not {_shown(value)}; {fallback}"
    if kind == "integer" or kind in NUMBER_TYPES:
        whole = kind == "integer"
        is_number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not is_number or (whole and not float(value).is_integer()):
            what = "a whole number" if whole else "a number"
            return f"must be {what}, not {_shown(value)}; send {what} or {fallback}"
        low, high = declaration.get("min"), declaration.get("max")
        if (low is not None and value < low) or (high is not None and value > high):
            return f"must be {_bounds(low, high)}, not {_number(value)}; send a value in range or {fallback}"
        return ""
    return ""  # a type this kernel does not know: the package's own business


KNOWN_TYPES = frozenset({"select", "integer"}) | STRING_TYPES | BOOLEAN_TYPES | NUMBER_TYPES
