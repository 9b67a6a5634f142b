"""Diagnostics: what the loader found wrong (or worth saying) about a plugin package.

Every problem is one `Diagnostic` with a stable `code`, the file relative to the package root
and the field path as the author wrote it (`runtime.io.visibility`, `contributes.hooks[2]`).
Loader code collects them in a `DiagnosticBag`; any error makes the package FAILED.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from covel.common.v1 import common_pb2


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    def to_proto(self) -> common_pb2.Severity.ValueType:
        return {
            Severity.ERROR: common_pb2.SEVERITY_ERROR,
            Severity.WARNING: common_pb2.SEVERITY_WARNING,
            Severity.INFO: common_pb2.SEVERITY_INFO,
        }[self]


@dataclass(frozen=True)
class Diagnostic:
    severity: Severity
    code: str
    message: str
    file: str = ""
    field_path: str = ""
    hint: str = ""
    plugin_id: str = ""

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def to_proto(self) -> common_pb2.Diagnostic:
        return common_pb2.Diagnostic(
            severity=self.severity.to_proto(),
            code=self.code,
            message=self.message,
            file=self.file,
            field_path=self.field_path,
            hint=self.hint,
            plugin_id=self.plugin_id,
        )

    def __str__(self) -> str:
        where = self.file + (f": {self.field_path}" if self.field_path else "")
        return f"{self.severity.value} [{self.code}] {where}: {self.message}"


@dataclass
class DiagnosticBag:
    """Collects diagnostics for one package; `file` is the default for new entries."""

    plugin_id: str
    file: str = "PLUGIN.md"
    items: list[Diagnostic] = field(default_factory=list)

    def add(
        self,
        severity: Severity,
        code: str,
        message: str,
        *,
        field_path: str = "",
        hint: str = "",
        file: str | None = None,
    ) -> Diagnostic:
        diagnostic = Diagnostic(
            severity=severity,
            code=code,
            message=message,
            file=self.file if file is None else file,
            field_path=field_path,
            hint=hint,
            plugin_id=self.plugin_id,
        )
        self.items.append(diagnostic)
        return diagnostic

    def error(self, code: str, message: str, **where: Any) -> Diagnostic:
        return self.add(Severity.ERROR, code, message, **where)

    def warning(self, code: str, message: str, **where: Any) -> Diagnostic:
        return self.add(Severity.WARNING, code, message, **where)

    def info(self, code: str, message: str, **where: Any) -> Diagnostic:
        return self.add(Severity.INFO, code, message, **where)

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.items.extend(diagnostics)

    @property
    def has_errors(self) -> bool:
        return any(item.is_error for item in self.items)

    def errors_since(self, mark: int) -> bool:
        return any(item.is_error for item in self.items[mark:])

    def __len__(self) -> int:
        return len(self.items)


def has_errors(diagnostics: Sequence[Diagnostic]) -> bool:
    return any(item.is_error for item in diagnostics)


# ----- pydantic validation errors -> diagnostics ------------------------------------------------

# Tags of the shape-discriminated unions in manifest_models; not part of the author's path.
_UNION_TAGS = frozenset({"scalar", "object"})

_TYPE_CODES = {
    "extra_forbidden": "unknown-key",
    "missing": "missing-field",
    "literal_error": "invalid-value",
    "enum": "invalid-value",
}


def format_path(parts: Sequence[str | int]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def author_path(loc: Sequence[str | int], raw: Any) -> list[str | int]:
    """The location as the author wrote it: union tags dropped, stop where the author wrote a scalar."""
    parts: list[str | int] = []
    current = raw
    for element in loc:
        if isinstance(current, dict):
            if isinstance(element, str) and element in current:
                parts.append(element)
                current = current[element]
                continue
            if isinstance(element, str) and element in _UNION_TAGS:
                continue
            # A key the author did not write: the missing field itself.
            parts.append(element)
            current = None
            continue
        if isinstance(current, list) and isinstance(element, int) and 0 <= element < len(current):
            parts.append(element)
            current = current[element]
            continue
        if isinstance(element, str) and element in _UNION_TAGS:
            continue
        # The author wrote a scalar (e.g. `- PreToolUse`) where the model looks inside an object.
        break
    return parts


def _code_for(error_type: str) -> str:
    if "-" in error_type:
        return error_type
    if error_type in _TYPE_CODES:
        return _TYPE_CODES[error_type]
    if error_type.endswith(("_type", "_parsing")) or error_type in {"model_type", "model_attributes_type"}:
        return "invalid-type"
    return "invalid-value"


def unknown_field_hint(key: str, known: Iterable[str]) -> str:
    """A near-miss suggestion for an unknown key; never the refused key itself (a field of
    another level, such as `description` inside a runtime, is not its own correction)."""
    import difflib

    candidates = sorted(name for name in known if name != key)
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.75)
    if close:
        return f"did you mean `{close[0]}`?"
    if key in known:
        return f"`{key}` is a field of another part of the manifest, not of this one; move it or remove it"
    return "remove it, or use a field the plugin contract reference documents"


def add_validation_errors(
    bag: DiagnosticBag,
    errors: Sequence[Any],
    raw: Any,
    *,
    file: str,
    prefix: str = "",
    known_fields: Iterable[str] = (),
) -> None:
    """One diagnostic per pydantic error, with the author's field path and a hint where we have one."""
    known = sorted(set(known_fields))
    seen: set[tuple[str, str]] = set()
    for error in errors:
        error_type = str(error["type"])
        parts = author_path(error["loc"], raw)
        path = format_path(parts)
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        code = _code_for(error_type)
        if (path, code) in seen:
            continue
        seen.add((path, code))
        message = str(error["msg"])
        hint = ""
        if code == "unknown-key":
            key = str(parts[-1]) if parts else ""
            message = f"unknown key `{key}`"
            hint = unknown_field_hint(key, known)
        elif code == "missing-field":
            message = "this field is required"
        elif code == "invalid-type" and isinstance(error.get("input"), (int, float)) and not isinstance(error.get("input"), bool):
            hint = "quote the value if it is meant as text"
        bag.error(code, message, file=file, field_path=path, hint=hint)
