"""Paths to plugin code. Covel's manifests name JavaScript (`entry: ./server/index.js`,
`function.handler: ./handler.js`, `guard: ./guard.js`); this kernel runs Python, so such a path
names the `.py` file of the same stem when the written file is absent. A ported manifest needs
no edit; validation notes the resolution."""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from services.registry.diagnostics import DiagnosticBag

PORTED_SUFFIXES = (".js", ".mjs", ".cjs", ".ts")


def python_stand_in(relative: str, is_file: Callable[[str], bool]) -> str | None:
    """`x.py` for a written `x.js` that is not in the package while `x.py` is; else None."""
    stem, suffix = posixpath.splitext(relative)
    if suffix in PORTED_SUFFIXES and not is_file(relative) and is_file(stem + ".py"):
        return stem + ".py"
    return None


def resolve_code_file(
    relative: str, is_file: Callable[[str], bool], bag: DiagnosticBag, *, written: str, file: str, field_path: str
) -> str:
    """The package-relative module a written code path loads (noted when it is the .py stand-in)."""
    stand_in = python_stand_in(relative, is_file)
    if stand_in is None:
        return relative
    bag.info(
        "code-path-python",
        f"`{written}` loads {stand_in}: plugin code is Python in this kernel",
        file=file,
        field_path=field_path,
    )
    return stand_in
