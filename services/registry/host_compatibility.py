"""`covel`: the host versions a package is written for, e.g. ">=0.0.45" or ">=0.1.0 <0.3".

A range is comparators (`>=`, `>`, `<=`, `<`, `=`/`==`, or a bare version meaning `=`)
separated by spaces or commas; all must hold. A package whose range excludes this host is
neither installed nor loaded.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import metadata

COMPARATOR = re.compile(r"^(>=|<=|==|=|>|<)?v?(\d+(?:\.\d+){0,2})$")
FALLBACK_HOST_VERSION = "0.1.0"


@cache
def host_version() -> str:
    try:
        return metadata.version("covel")
    except metadata.PackageNotFoundError:
        return FALLBACK_HOST_VERSION


def _parts(version: str) -> tuple[int, int, int]:
    numbers = [int(part) for part in re.findall(r"\d+", version)[:3]]
    major, minor, patch = [*numbers, 0, 0, 0][:3]
    return major, minor, patch


def parse_range(text: str) -> list[tuple[str, tuple[int, int, int]]] | None:
    """The comparators of a range, or None when it is not one."""
    tokens = [token for token in re.split(r"[\s,]+", text.strip()) if token]
    if not tokens:
        return None
    comparators = []
    for token in tokens:
        match = COMPARATOR.match(token)
        if not match:
            return None
        comparators.append((match.group(1) or "=", _parts(match.group(2))))
    return comparators


def satisfies(version: str, comparators: list[tuple[str, tuple[int, int, int]]]) -> bool:
    current = _parts(version)
    checks = {
        ">=": lambda bound: current >= bound,
        ">": lambda bound: current > bound,
        "<=": lambda bound: current <= bound,
        "<": lambda bound: current < bound,
        "=": lambda bound: current == bound,
        "==": lambda bound: current == bound,
    }
    return all(checks[operator](bound) for operator, bound in comparators)
