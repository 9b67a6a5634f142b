"""Which action-kind field schemas a player's input box can show (spec: 输入框模式): the registry warns about
the others when it loads a package, and ListActionKinds tells clients which kinds have such fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COMPOSER_TYPES = frozenset({"string", "number", "integer", "boolean"})


def composer_can_show(schema: Mapping[str, Any]) -> bool:
    """A flat object of string (enum allowed), number, integer and boolean fields."""
    if schema.get("type") != "object":
        return False
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return False
    for spec in properties.values():
        if not isinstance(spec, dict) or spec.get("type") not in COMPOSER_TYPES:
            return False
        if "enum" in spec and spec.get("type") != "string":
            return False
    required = schema.get("required", [])
    return isinstance(required, list) and all(item in properties for item in required)
