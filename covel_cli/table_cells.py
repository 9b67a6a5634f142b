"""What every generated table of the docs (covel_cli/doc_tables.py) shares: a missing meaning's error,
and how a literal value and a constrained type read in a cell.
"""

from __future__ import annotations

from typing import Any

from annotated_types import Ge, Le, MaxLen, MinLen

SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", Any: "any"}


class MissingMeaning(LookupError):
    """A model field without a meaning in the tables of its doc_tables module."""


def literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def constrained(base: str, constraints: list[Any]) -> str:
    low = next((c.ge for c in constraints if isinstance(c, Ge)), None)
    high = next((c.le for c in constraints if isinstance(c, Le)), None)
    shortest = next((c.min_length for c in constraints if isinstance(c, MinLen)), None)
    longest = next((c.max_length for c in constraints if isinstance(c, MaxLen)), None)
    if low is not None and high is not None:
        return f"{base} {low}–{high}"
    if low is not None:
        return f"{base} ≥ {low}"
    if high is not None:
        return f"{base} ≤ {high}"
    if base.startswith("list of") and shortest:
        return f"non-empty {base}" if longest is None else f"{base} (at most {longest})"
    if base.startswith("list of") and longest:
        return f"{base} (at most {longest})"
    if base == "string" and shortest:
        return "string" if longest is None else f"string of at most {longest}"
    if base == "string" and longest:
        return f"string of at most {longest}"
    return base
