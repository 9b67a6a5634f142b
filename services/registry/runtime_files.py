"""Runtime manifests of a package: `runtimes/<id>/RUNTIME.md` found, read and validated."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from services.registry.diagnostics import DiagnosticBag, Severity, add_validation_errors
from services.registry.frontmatter import Document, parse_document
from services.registry.locale_files import inline_locale_maps
from services.registry.manifest_fields import PLUGIN_ID
from services.registry.manifest_models import PACKAGE_ONLY_FIELDS
from services.registry.manifest_reading import (
    KNOWN_FIELDS,
    PLUGIN_FILE,
    RUNTIME_FILE,
    RUNTIMES_DIR,
    clean_runtime,
    exact_child,
    read_text,
)
from services.registry.runtime_models import RuntimeDecl


@dataclass
class RuntimeFile:
    runtime_id: str
    folder: Path
    file: str
    document: Document
    decl: RuntimeDecl | None


def discover_runtime_files(root: Path, plugin_id: str, bag: DiagnosticBag, *, strict: bool = False) -> tuple[list[RuntimeFile], bool]:
    """Runtimes under runtimes/<id>/RUNTIME.md; also whether any real runtime folder exists."""
    folder = root / RUNTIMES_DIR
    if not folder.is_dir() or folder.is_symlink():
        return [], False
    found: list[RuntimeFile] = []
    any_folder = False
    for child in sorted(folder.iterdir(), key=lambda item: item.name):
        relative = f"{RUNTIMES_DIR}/{child.name}"
        if child.is_symlink():
            if child.is_dir():
                bag.info(
                    "runtime-symlink-ignored",
                    "symlinked runtime folders are not discovered",
                    file=relative,
                )
            continue
        if not child.is_dir():
            continue
        any_folder = True
        present, wrong = exact_child(child, RUNTIME_FILE)
        if not present:
            severity = Severity.ERROR if strict else Severity.WARNING
            if wrong:
                bag.add(
                    severity,
                    "runtime-manifest-case",
                    f"found `{wrong}`; the manifest must be named exactly {RUNTIME_FILE}" + ("" if strict else "; this runtime is not loaded"),
                    file=f"{relative}/{wrong}",
                    hint=f"rename it to {relative}/{RUNTIME_FILE}",
                )
            else:
                bag.add(
                    severity,
                    "runtime-manifest-missing",
                    f"{relative} has no {RUNTIME_FILE}" + ("" if strict else "; this runtime is not loaded"),
                    file=relative,
                    hint=f"add {relative}/{RUNTIME_FILE}, or move shared code to lib/",
                )
            continue
        file = f"{relative}/{RUNTIME_FILE}"
        if not PLUGIN_ID.match(child.name):
            bag.error(
                "invalid-runtime-id",
                f"`{child.name}` is not a valid runtime id (lowercase letters, digits, `.`, `_`, `-`)",
                file=file,
            )
            continue
        text = read_text(child / RUNTIME_FILE, bag, file)
        if text is None:
            continue
        document = parse_document(text, bag, file)
        if document is None:
            continue
        data = dict(document.data)
        for key in sorted(set(data) & PACKAGE_ONLY_FIELDS):
            bag.error(
                "runtime-package-field",
                f"`{key}` is a package field; a RUNTIME.md declares only its runtime",
                file=file,
                field_path=key,
                hint=f"move `{key}` to {PLUGIN_FILE}",
            )
            data.pop(key)
        data = clean_runtime(inline_locale_maps(data, bag, file=file), bag, file=file, prefix="", strict=strict)
        decl: RuntimeDecl | None = None
        try:
            decl = RuntimeDecl.model_validate(data)
        except ValidationError as error:
            add_validation_errors(bag, error.errors(), data, file=file, known_fields=KNOWN_FIELDS)
        found.append(RuntimeFile(f"{plugin_id}/{child.name}", child, file, document, decl))
    return found, any_folder


