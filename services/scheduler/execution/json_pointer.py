"""RFC 6901 JSON Pointer lookup: array indexes are `0` or decimal without leading zeros."""

from __future__ import annotations

import re
from typing import Any

_INDEX = re.compile(r"^(0|[1-9][0-9]*)$")


class PointerError(ValueError):
    pass


def parse(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PointerError(f"{pointer!r} must be empty or start with '/'")
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def resolve(document: Any, pointer: str) -> Any:
    """The value at `pointer`; PointerError when it does not exist (`/01` and `/+1` never match array items)."""
    value = document
    for token in parse(pointer):
        if isinstance(value, dict):
            if token not in value:
                raise PointerError(f"{pointer}: no member {token!r}")
            value = value[token]
        elif isinstance(value, list):
            if not _INDEX.match(token) or int(token) >= len(value):
                raise PointerError(f"{pointer}: {token!r} is not an index of an array of {len(value)}")
            value = value[int(token)]
        else:
            raise PointerError(f"{pointer}: cannot step into {type(value).__name__} with {token!r}")
    return value
