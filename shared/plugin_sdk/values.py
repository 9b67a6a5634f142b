"""What a function handler returns, where Python's spelling differs from the spec's.

A handler that returns nothing (or `None`) gives no value: its output is `{}`, no export is
recorded and required inputs bound to it gate their consumers. To give the business value JSON
null (projected as `{"value": null}`, checked against the output contract like any value), return
`NULL`:

    from shared.plugin_sdk.values import NULL

    def handler(ctx):
        return NULL
"""

from __future__ import annotations


class _JsonNull:
    """The JSON null a handler returns as its value (distinct from returning nothing)."""

    _instance: _JsonNull | None = None

    def __new__(cls) -> _JsonNull:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NULL"

    def __bool__(self) -> bool:
        return False


NULL = _JsonNull()
