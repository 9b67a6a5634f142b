"""`contributes.actionKinds`: action types a package adds, `<pluginId>/<name>` on the wire."""

from __future__ import annotations

import re
from typing import Any

from services.registry.diagnostics import DiagnosticBag
from services.registry.manifest_fields import BASE_ACTION_KINDS
from services.registry.manifest_models import ActionKindDecl
from services.registry.package_files import PackageFiles
from shared.manifest.composer import composer_can_show

KEBAB_CASE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
def compile_action_kinds(
    kinds: list[ActionKindDecl] | None, plugin_id: str, files: PackageFiles, bag: DiagnosticBag, *, file: str
) -> list[dict[str, Any]]:
    compiled: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for index, kind in enumerate(kinds or []):
        path = f"contributes.actionKinds[{index}]"
        before = len(bag)
        if not KEBAB_CASE.match(kind.name):
            bag.error(
                "invalid-action-kind-name",
                f"`{kind.name}` is not lowercase kebab-case",
                file=file,
                field_path=f"{path}.name",
                hint="write e.g. `whisper` or `cast-spell`",
            )
        elif kind.name in BASE_ACTION_KINDS:
            bag.error(
                "base-action-kind",
                f"`{kind.name}` is a base action kind ({', '.join(sorted(BASE_ACTION_KINDS))}); a plugin cannot redeclare it",
                file=file,
                field_path=f"{path}.name",
            )
        if kind.name in seen:
            bag.error(
                "duplicate-action-kind",
                f"action kind `{kind.name}` is declared twice (also at contributes.actionKinds[{seen[kind.name]}])",
                file=file,
                field_path=f"{path}.name",
            )
        seen.setdefault(kind.name, index)
        entry: dict[str, Any] = {
            "name": kind.name,
            "kind": f"{plugin_id}/{kind.name}",
            "roles": list(kind.roles or ["player"]),
            "text": kind.text or "optional",
            "actor": True if kind.actor is None else kind.actor,
        }
        if kind.schema_ is not None:
            relative, document = files.json_file(
                kind.schema_, bag, file=file, field_path=f"{path}.schema", what="action kind schema", require_object=True
            )
            if relative is not None:
                entry["schema"] = relative
                if isinstance(document, dict) and not composer_can_show(document):
                    bag.warning(
                        "composer-schema",
                        f"fields schema of {kind.name} cannot be shown in the composer",
                        file=file,
                        field_path=f"{path}.schema",
                        hint="the composer shows a flat object of string, number, integer or boolean properties",
                    )
        if kind.display is not None:
            entry["display"] = kind.display.model_dump(exclude_none=True)
        if not bag.errors_since(before):
            compiled.append(entry)
    return compiled
