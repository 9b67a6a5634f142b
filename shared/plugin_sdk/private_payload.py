"""A hook handler's private payload, copied only as far as the handler reaches into it.

Every handler must get its own payload: changing it has no effect on the kernel or on the
next handler. A deep copy per handler costs more than the handler call itself, so each
handler gets a shallow `PrivatePayload` instead, and a nested dict or list is deep-copied the
first time the handler reads it. Reads of strings and numbers cost nothing extra. Every
public way to reach a value (indexing, get, items, values, iteration, dict(), {**p}, copy,
pickle, json.dumps) goes through the copying accessors.
"""

from __future__ import annotations

import copy as _copy
from typing import Any

_MUTABLE = (dict, list)


def json_copy(value: Any) -> Any:
    """Deep copy of JSON-shaped data (dicts, lists, scalars): several times faster than copy.deepcopy."""
    kind = type(value)
    if kind is dict or kind is PrivatePayload:
        return {key: json_copy(item) for key, item in dict.items(value)}
    if kind is list:
        return [json_copy(item) for item in value]
    if isinstance(value, (dict, list)):
        return _copy.deepcopy(value)
    return value


class PrivatePayload(dict):
    __slots__ = ()

    def _private(self, key: Any, value: Any) -> Any:
        if isinstance(value, _MUTABLE):
            value = json_copy(value)
            dict.__setitem__(self, key, value)
        return value

    def __getitem__(self, key: Any) -> Any:
        return self._private(key, dict.__getitem__(self, key))

    def get(self, key: Any, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return self[key]
        return default

    def pop(self, key: Any, *default: Any) -> Any:
        if dict.__contains__(self, key):
            self[key]
        return dict.pop(self, key, *default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return self[key]
        dict.__setitem__(self, key, default)
        return default

    def popitem(self) -> tuple[Any, Any]:
        key, value = dict.popitem(self)
        return key, json_copy(value)

    # Lists of private copies, not dict's live views: the narrower return type is deliberate.
    def values(self) -> list[Any]:  # type: ignore[override]
        return [self[key] for key in dict.keys(self)]

    def items(self) -> list[tuple[Any, Any]]:  # type: ignore[override]
        return [(key, self[key]) for key in dict.keys(self)]

    def __iter__(self):
        # Overriding iteration makes dict(p) and {**p} read through __getitem__ (CPython skips its fast path).
        return iter(dict.keys(self))

    def copy(self) -> dict:
        return {key: self[key] for key in dict.keys(self)}

    def __or__(self, other: Any) -> dict:
        merged = self.copy()
        merged.update(other)
        return merged

    def __copy__(self) -> dict:
        return self.copy()

    def __deepcopy__(self, memo: dict) -> dict:
        return json_copy(self)

    def __reduce__(self):
        return (dict, (self.copy(),))
