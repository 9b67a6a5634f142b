"""Reading a world package's YAML files: a file as JSON-ready data (read_yaml_file), and a list that
world.yaml holds inline or in a file it names (listed_items). Problems are diagnostics, never raised.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any

import yaml

from services.registry.diagnostics import DiagnosticBag, format_path
from services.registry.loaded_world import WORLD_FILE
from services.registry.manifest_reading import read_text
from services.registry.package_files import PackageFiles
from shared.bounded_yaml import load_yaml


class NotJson(ValueError):
    """A YAML value JSON cannot hold (binary, a set, NaN); `path` is where."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(what)
        self.path = path


def json_ready(value: Any, path: tuple[str | int, ...] = ()) -> Any:
    """YAML's values as JSON: dates and times as ISO text (as if quoted), mapping keys as text."""
    if isinstance(value, dict):
        return {str(key): json_ready(item, (*path, str(key))) for key, item in value.items()}
    if isinstance(value, list):
        return [json_ready(item, (*path, index)) for index, item in enumerate(value)]
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        raise NotJson(format_path(path), f"`{value}` is not a number JSON can hold")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise NotJson(format_path(path), f"a {type(value).__name__} value (YAML `!!binary`, `!!set`, …) cannot be world data")


def read_yaml_file(files: PackageFiles, relative: str, bag: DiagnosticBag, *, code: str, referred_from: tuple[str, str] | None = None) -> Any:
    """A package YAML file as JSON-ready data, or None after a diagnostic (on the file itself, or
    on the field that named it when it is missing or outside the package)."""
    where_file, where_field = referred_from or (relative, "")
    if not files.is_file(relative):
        bag.error("file-missing", f"`{relative}` does not exist in the world package", file=where_file, field_path=where_field,
                  hint=f"add {relative}, or fix the path")
        return None
    text = read_text(files.root / relative, bag, relative)
    if text is None:
        return None
    try:
        return json_ready(load_yaml(text))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        bag.error(code, f"not valid YAML{at}: {problem}", file=relative, hint="fix the YAML; quote text that YAML reads as something else")
    except NotJson as error:
        bag.error("world-value-not-json", str(error), file=relative, field_path=error.path, hint="write it as text (quoted)")
    return None


@dataclass(frozen=True)
class Listed:
    """A list of a world package as written: its items, the file they are in, their field path prefix there."""

    items: list[Any]
    file: str = WORLD_FILE
    prefix: str = ""


def listed_items(written: str | list[Any] | None, field: str, default_file: str, noun: str, files: PackageFiles,
                 bag: DiagnosticBag, *, codes: tuple[str, str]) -> Listed:
    """A list world.yaml holds under `field` inline, or in a YAML file of the package it names (`default_file` by
    convention when the field is not written), the file holding `[...]` or `{<field>: [...]}`. `codes`: the
    diagnostic codes of a file that is not YAML and of one that holds no list."""
    yaml_code, not_list_code = codes
    if isinstance(written, list):
        return Listed(written, WORLD_FILE, field)
    if written is None and not files.is_file(default_file):
        return Listed([], WORLD_FILE, field)
    relative = default_file if written is None else files.relative(WORLD_FILE, written)
    if relative is None:
        bag.error("file-outside-package", f"the {field} file `{written}` points outside the world package", field_path=field,
                  hint=f"write a path inside the package, e.g. ./{default_file}")
        return Listed([], WORLD_FILE, field)
    data = read_yaml_file(files, relative, bag, code=yaml_code, referred_from=(WORLD_FILE, field))
    if isinstance(data, dict) and isinstance(data.get(field), list):
        return Listed(list(data[field]), relative, field)
    if data is None or isinstance(data, list):
        return Listed(data or [], relative, "")
    bag.error(not_list_code, f"{relative} holds a {type(data).__name__}; write a list of {noun} (or `{field}: [...]`)",
              file=relative)
    return Listed([], relative, "")
