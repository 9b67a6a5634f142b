"""Files a manifest refers to: resolved inside the package, read, and parsed as JSON.

A written path is relative to the manifest that wrote it (`PLUGIN.md` at the root, or
`runtimes/<id>/RUNTIME.md`). It must stay inside the package: no leading `/`, no `..` that
leaves the root, no backslashes, and no symlink that resolves outside. Nothing is executed.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.registry.diagnostics import DiagnosticBag

# Larger JSON documents than this are not read (a schema or UI spec is a few kilobytes).
MAX_JSON_BYTES = 2 * 1024 * 1024
CONTRACT_SCHEMA_PREFIX = "contract:"


@dataclass(frozen=True)
class PackageFiles:
    root: Path

    def relative(self, manifest_file: str, written: str) -> str | None:
        """`written` as a package-relative path, or None when it leaves the package."""
        if not written or written.startswith("/") or "\\" in written or ":" in written.split("/", 1)[0]:
            return None
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(manifest_file), written))
        if joined in (".", "..") or joined.startswith("../"):
            return None
        return joined

    def is_file(self, relative: str) -> bool:
        target = self.root / relative
        try:
            return target.is_file() and target.resolve().is_relative_to(self.root.resolve())
        except OSError:
            return False

    def exists_inside(self, relative: str) -> bool:
        target = self.root / relative
        try:
            return target.exists() and target.resolve().is_relative_to(self.root.resolve())
        except OSError:
            return False

    def json_file(
        self,
        written: str,
        bag: DiagnosticBag,
        *,
        file: str,
        field_path: str,
        what: str,
        require_object: bool = False,
    ) -> tuple[str | None, Any]:
        """Resolve, read and parse one JSON file; (relative path, document) or (None, None) after a diagnostic."""
        relative = self.relative(file, written)
        if relative is None:
            bag.error(
                "file-outside-package",
                f"the {what} `{written}` points outside the package",
                file=file,
                field_path=field_path,
                hint="write a path inside the package, relative to this manifest (e.g. ./schemas/x.json)",
            )
            return None, None
        if not self.is_file(relative):
            bag.error(
                "file-missing",
                f"the {what} `{written}` does not exist (looked for {relative})",
                file=file,
                field_path=field_path,
                hint=f"add {relative} to the package, or fix the path",
            )
            return None, None
        target = self.root / relative
        try:
            if target.stat().st_size > MAX_JSON_BYTES:
                bag.error(
                    "file-too-large",
                    f"the {what} {relative} is larger than {MAX_JSON_BYTES // 1024} KiB",
                    file=file,
                    field_path=field_path,
                )
                return None, None
            document = json.loads(target.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            bag.error("invalid-json", f"the {what} {relative} is not UTF-8 text", file=file, field_path=field_path)
            return None, None
        except json.JSONDecodeError as error:
            bag.error(
                "invalid-json",
                f"the {what} {relative} is not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}",
                file=file,
                field_path=field_path,
                hint=f"fix the JSON in {relative}",
            )
            return None, None
        except OSError as error:
            bag.error("file-unreadable", f"the {what} {relative} cannot be read: {error.strerror or error}", file=file, field_path=field_path)
            return None, None
        if require_object and not isinstance(document, dict):
            bag.error(
                "schema-not-object",
                f"the {what} {relative} must be a JSON object, not {type(document).__name__}",
                file=file,
                field_path=field_path,
                hint='a JSON Schema is an object such as {"type": "object", "properties": {...}}',
            )
            return None, None
        return relative, document
