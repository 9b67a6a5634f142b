"""The player's plugin setting values, checked against what the packages declare before a session
is created (spec: contributes.settings, 玩家配置项, read by runtimes as ctx.userSettings).

A package that declares `contributes.settings` accepts only the keys it declares, each of its
declared type:

- `select`: one of `options`;
- `text`, `textarea`, `slot`: a string;
- `integer`: a whole number (protobuf Struct numbers arrive as floats: 3.0 counts), in `min`..`max`;
- `slider`, `number`: a number in `min`..`max`;
- `boolean`, `toggle`, `checkbox`: true or false.

A value that is wrong gets INVALID_ARGUMENT naming `plugin_settings.<pluginId>.<key>`, what the
value must be and what to do; nothing is created. The session-wide `framework` entry takes the
kernel's own settings (maxAutoAdvance, and the execution quotas maxSubagentCalls / maxActors).
A package that declares no settings is not checked here: it reads whatever it was given.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from shared.errors import invalid_argument
from shared.structs import from_struct

FRAMEWORK = "framework"
# The kernel's session settings under plugin_settings["framework"]: (type, min, max).
FRAMEWORK_SETTINGS: dict[str, dict[str, Any]] = {
    "maxAutoAdvance": {"key": "maxAutoAdvance", "type": "integer", "min": 0},
    "maxSubagentCalls": {"key": "maxSubagentCalls", "type": "integer", "min": 0, "max": 64},
    "maxActors": {"key": "maxActors", "type": "integer", "min": 0, "max": 16},
}
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


def _same(option: Any, value: Any) -> bool:
    """Equal as JSON values: true is not 1, and 2 equals 2.0 (Struct numbers are floats)."""
    if isinstance(option, bool) or isinstance(value, bool):
        return isinstance(option, bool) and isinstance(value, bool) and option == value
    if isinstance(option, int | float) and isinstance(value, int | float):
        return option == value
    return type(option) is type(value) and option == value


def declared_settings(definition: Mapping[str, Any]) -> dict[str, dict[str, Any]] | None:
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
        options = list(declaration.get("options") or [])
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
            if low is not None and high is not None:
                bounds = f"between {_number(low)} and {_number(high)}"
            elif low is not None:
                bounds = f"at least {_number(low)}"
            else:
                bounds = f"at most {_number(high)}"
            return f"must be {bounds}, not {_number(value)}; send a value in range or {fallback}"
        return ""
    return ""  # a type this kernel does not know: the package's own business


def check_plugin_settings(settings: Mapping[str, Any], packages: Mapping[str, Any]) -> None:
    """Raise INVALID_ARGUMENT for the first setting value its package (or the kernel) refuses.

    `settings`: plugin id -> Struct (or dict) of values; `packages`: plugin id -> PluginPackage
    (its `definition` Struct) of every installed plugin named in `settings`."""
    for plugin_id, values in settings.items():
        given = values if isinstance(values, Mapping) else from_struct(values)
        if plugin_id == FRAMEWORK:
            declared: dict[str, dict[str, Any]] | None = FRAMEWORK_SETTINGS
            whose = "the kernel's session settings"
        else:
            package = packages.get(plugin_id)
            if package is None:
                raise invalid_argument(
                    f"plugin_settings.{plugin_id}",
                    f"no plugin {plugin_id!r} is installed; remove its settings, or install it and request it",
                )
            declared = declared_settings(from_struct(package.definition))
            whose = f"plugin {plugin_id}"
        if declared is None:
            continue
        for key, value in given.items():
            field = f"plugin_settings.{plugin_id}.{key}"
            if key not in declared:
                known = ", ".join(sorted(declared)) or "none"
                raise invalid_argument(field, f"{whose} has no setting {key!r} (it declares: {known}); remove it or fix its name")
            problem = value_problem(declared[key], value)
            if problem:
                raise invalid_argument(field, problem)

