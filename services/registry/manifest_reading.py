"""Reading a package's manifest files: exact file names, UTF-8 text, paths kept inside the package,
and unknown fields dropped (with a warning, or an error when validating strictly)."""

from __future__ import annotations

import difflib
import os
import posixpath
from pathlib import Path
from typing import Any

from services.registry.diagnostics import DiagnosticBag, Severity, unknown_field_hint
from services.registry.manifest_fields import Strict
from services.registry.manifest_models import CONTRIBUTES_FIELDS, GUARDED_ROOT_FIELDS, GUARDED_RUNTIME_FIELDS, ROOT_FIELDS
from services.registry.runtime_models import RUNTIME_FIELDS
from shared import ui_panels

PLUGIN_FILE = "PLUGIN.md"
RUNTIME_FILE = "RUNTIME.md"
RUNTIMES_DIR = "runtimes"


def _all_known_fields() -> set[str]:
    names: set[str] = set()
    pending: list[type] = [Strict]
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        for name, info in getattr(model, "model_fields", {}).items():
            names.add(info.alias or name)
    return names


KNOWN_FIELDS = frozenset(_all_known_fields())


def read_text(path: Path, bag: DiagnosticBag, file: str) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        bag.error("file-encoding", "the file is not UTF-8 text", file=file)
    except OSError as error:
        bag.error("file-unreadable", f"the file cannot be read: {error.strerror or error}", file=file)
    return None


def exact_child(folder: Path, name: str) -> tuple[bool, str | None]:
    """Whether `folder` holds `name` with exactly this case, and a wrong-case match if not."""
    try:
        names = os.listdir(folder)
    except OSError:
        return False, None
    if name in names:
        return True, None
    wrong = next((item for item in names if item.lower() == name.lower()), None)
    return False, wrong


def drop_unknown(
    data: dict[str, Any],
    known: frozenset[str],
    guarded: tuple[str, ...],
    bag: DiagnosticBag,
    *,
    file: str,
    prefix: str = "",
    strict: bool = False,
) -> dict[str, Any]:
    """Unknown fields at this level are dropped with a warning (an error when validating); near-misses of guarded fields are errors."""
    kept: dict[str, Any] = {}
    for key, value in data.items():
        if key in known:
            kept[key] = value
            continue
        path = f"{prefix}.{key}" if prefix else key
        close = difflib.get_close_matches(key, guarded, n=1, cutoff=0.75)
        if close:
            bag.error(
                "misspelled-field",
                f"unknown field `{key}` looks like `{close[0]}`; a misspelt limiting field is not ignored",
                file=file,
                field_path=path,
                hint=f"rename it to `{close[0]}`",
            )
            continue
        bag.add(
            Severity.ERROR if strict else Severity.WARNING,
            "unknown-field",
            f"unknown field `{key}`" + (" is not part of the plugin contract" if strict else " is ignored"),
            file=file,
            field_path=path,
            hint=unknown_field_hint(key, known),
        )
    return kept


def clean_runtime(data: Any, bag: DiagnosticBag, *, file: str, prefix: str, strict: bool = False) -> Any:
    if not isinstance(data, dict):
        return data
    return drop_unknown(data, RUNTIME_FIELDS, GUARDED_RUNTIME_FIELDS, bag, file=file, prefix=prefix, strict=strict)


UI_LOCATIONS = frozenset(ui_panels.LOCATIONS)


def clean_root(data: dict[str, Any], bag: DiagnosticBag, *, strict: bool = False) -> dict[str, Any]:
    cleaned = drop_unknown(data, ROOT_FIELDS, GUARDED_ROOT_FIELDS, bag, file=PLUGIN_FILE, strict=strict)
    if isinstance(cleaned.get("contributes"), dict):
        cleaned["contributes"] = drop_unknown(
            cleaned["contributes"], CONTRIBUTES_FIELDS, (), bag, file=PLUGIN_FILE, prefix="contributes", strict=strict
        )
        ui = cleaned["contributes"].get("ui")
        if isinstance(ui, dict):
            cleaned["contributes"]["ui"] = drop_unknown(
                ui, UI_LOCATIONS, (), bag, file=PLUGIN_FILE, prefix="contributes.ui", strict=strict
            )
    if "runtime" in cleaned:
        cleaned["runtime"] = clean_runtime(cleaned["runtime"], bag, file=PLUGIN_FILE, prefix="runtime", strict=strict)
    return cleaned


def package_relative(root: Path, written: str) -> str | None:
    if written.startswith("/") or "\\" in written:
        return None
    normal = posixpath.normpath(written)
    if normal in (".", "..") or normal.startswith("../"):
        return None
    return normal


def is_inside_file(root: Path, relative: str) -> bool:
    target = root / relative
    try:
        return target.is_file() and target.resolve().is_relative_to(root.resolve())
    except OSError:
        return False


