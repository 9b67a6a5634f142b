"""JSON Schema of the author format, generated from the pydantic manifest models.

`plugin_manifest_schema()` describes a root PLUGIN.md frontmatter, `runtime_manifest_schema()`
a RUNTIME.md frontmatter (or the inline `runtime:` block). Field names are the spec's. Print
them with `python -m services.registry.manifest_schema [plugin|runtime]`.

The schema states shapes, types and allowed values; cross-field rules (a story runtime's
inputs, trigger and stage combinations, files that must exist) are the loader's, not the
schema's.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from services.registry.manifest_models import PluginManifest
from services.registry.runtime_models import RuntimeDecl

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _schema(model: type, title: str, description: str) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, mode="validation")  # type: ignore[attr-defined]
    return {"$schema": SCHEMA_DIALECT, **schema, "title": title, "description": description}


def plugin_manifest_schema() -> dict[str, Any]:
    return _schema(PluginManifest, "PLUGIN.md frontmatter", "The root manifest of a Covel plugin package.")


def runtime_manifest_schema() -> dict[str, Any]:
    return _schema(RuntimeDecl, "RUNTIME.md frontmatter", "One runtime of a Covel plugin package, as the author writes it.")


def main(argv: list[str]) -> int:
    which = argv[0] if argv else "plugin"
    if which not in ("plugin", "runtime"):
        print("usage: python -m services.registry.manifest_schema [plugin|runtime]", file=sys.stderr)
        return 2
    schema = plugin_manifest_schema() if which == "plugin" else runtime_manifest_schema()
    print(json.dumps(schema, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
