"""Frontmatter: plain YAML between two lines that are exactly `---`, then the prompt body.

An opening line such as `---js` or `---javascript` names a front-matter engine that would run
code; it is rejected before anything is parsed, so metadata can never execute.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import Any

import yaml

from services.registry.diagnostics import DiagnosticBag
from shared.bounded_yaml import load_yaml

FENCE = "---"
ENGINE_MARKER = re.compile(r"^---\s*([A-Za-z][\w.+-]*)\s*$")


@dataclass(frozen=True)
class Document:
    """A parsed manifest file: the frontmatter mapping and the stripped body."""

    data: dict[str, Any]
    body: str


def _json_safe(value: Any) -> Any:
    """YAML can produce dates and non-string keys; manifests are JSON-shaped."""
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def parse_document(text: str, bag: DiagnosticBag, file: str) -> Document | None:
    """Split and parse one PLUGIN.md / RUNTIME.md (or a variant); None after an error diagnostic."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines()
    first = lines[0].rstrip() if lines else ""
    if first != FENCE:
        engine = ENGINE_MARKER.match(first)
        if engine:
            bag.error(
                "frontmatter-engine",
                f"the frontmatter opens with `{first}`: front-matter engines (`---{engine.group(1)}`) are not supported",
                file=file,
                hint="open the frontmatter with a line that is exactly `---`; it must be plain YAML",
            )
        else:
            bag.error(
                "frontmatter-missing",
                "the file must start with YAML frontmatter between two lines that are exactly `---`",
                file=file,
                hint="add `---` as the first line, the YAML fields, then a closing `---`",
            )
        return None
    closing = next((index for index in range(1, len(lines)) if lines[index].rstrip() == FENCE), None)
    if closing is None:
        bag.error(
            "frontmatter-unclosed",
            "the frontmatter has no closing line `---`",
            file=file,
            hint="end the YAML fields with a line that is exactly `---`",
        )
        return None
    source = "\n".join(lines[1:closing])
    try:
        data = load_yaml(source) if source.strip() else {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 2}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        bag.error(
            "frontmatter-yaml",
            f"the frontmatter is not valid YAML{where}: {problem}",
            file=file,
            hint="fix the YAML; quote values that contain `:` or start with special characters",
        )
        return None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        bag.error(
            "frontmatter-not-mapping",
            f"the frontmatter must be a YAML mapping of fields, not a {type(data).__name__}",
            file=file,
            hint="write `field: value` lines between the `---` lines",
        )
        return None
    body = "\n".join(lines[closing + 1 :]).strip()
    return Document(data=_json_safe(data), body=body)
