"""JSON files a package names: contract and data schemas, input `accepts`, output and payload
schemas, and UI specs. Each must be a file inside the package and valid JSON.

`contract:<id>` in place of a path names a published contract schema and is resolved later,
across providers; only local paths are read here.
"""

from __future__ import annotations

from typing import Any

from services.registry.diagnostics import DiagnosticBag
from services.registry.manifest_fields import CONTRACT_ID
from services.registry.manifest_models import Contributes, PluginManifest
from services.registry.package_files import CONTRACT_SCHEMA_PREFIX, PackageFiles
from services.registry.runtime_compiler import CompiledRuntime
from shared import ui_panel_specs, ui_panels


def _contract_reference(written: str, bag: DiagnosticBag, *, file: str, field_path: str) -> bool:
    """True when `written` is `contract:<id>` (checked for a valid id)."""
    if not written.startswith(CONTRACT_SCHEMA_PREFIX):
        return False
    contract = written[len(CONTRACT_SCHEMA_PREFIX) :]
    if not CONTRACT_ID.match(contract):
        bag.error(
            "invalid-contract-id",
            f"`{contract}` is not a contract id: write contract:<name>@<version>",
            file=file,
            field_path=field_path,
        )
    return True


def check_schema(written: Any, files: PackageFiles, bag: DiagnosticBag, *, file: str, field_path: str, what: str) -> str | None:
    """A schema reference: `contract:<id>` or a local JSON object file. The package-relative path, when local."""
    if not isinstance(written, str):
        return None
    if _contract_reference(written, bag, file=file, field_path=field_path):
        return None
    relative, _ = files.json_file(written, bag, file=file, field_path=field_path, what=what, require_object=True)
    return relative


def check_root_schemas(manifest: PluginManifest, files: PackageFiles, bag: DiagnosticBag, *, file: str) -> list[tuple[str, str, dict]]:
    """The checks of the root's schema files and UI specs; the panels that can be drawn."""
    for contract, decl in (manifest.contracts or {}).items():
        if not CONTRACT_ID.match(contract):
            bag.error("invalid-contract-id", f"`{contract}` is not a contract id", file=file, field_path=f"contracts.{contract}")
            continue
        check_schema(decl.schema_, files, bag, file=file, field_path=f"contracts.{contract}.schema", what="contract schema")
    contributes = manifest.contributes
    if contributes is None:
        return []
    for namespace, data_decl in (contributes.data or {}).items():
        if data_decl.schema_ is not None:
            check_schema(data_decl.schema_, files, bag, file=file, field_path=f"contributes.data.{namespace}.schema", what="data schema")
    return _check_ui(contributes, files, bag, file=file)


def _ui_paths(value: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(value, path)]
    if isinstance(value, list):
        return [(item, f"{path}[{index}]") for index, item in enumerate(value) if isinstance(item, str)]
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            found.extend(_ui_paths(item, f"{path}.{key}"))
        return found
    return []


def _check_ui(contributes: Contributes, files: PackageFiles, bag: DiagnosticBag, *, file: str) -> list[tuple[str, str, dict]]:
    """(location, file, spec) of each panel that can be drawn; a diagnostic for each problem of the others."""
    panels = []
    seen: set[str] = set()
    for location, value in (contributes.ui or {}).items():
        if location not in ui_panels.LOCATIONS:
            continue  # dropped with a warning by the loader
        for written, path in _ui_paths(value, f"contributes.ui.{location}"):
            relative, spec = files.json_file(written, bag, file=file, field_path=path, what="UI spec", require_object=True)
            if relative is None or not isinstance(spec, dict):
                continue
            kinds = [key for key in ("view", "webview") if key in spec]
            if len(kinds) != 1:
                bag.error("ui-spec-shape", f"the UI spec {relative} must declare exactly one of `view` or `webview`"
                          + (" (it declares both)" if len(kinds) == 2 else ""), file=file, field_path=path, hint=f"fix {relative}")
                continue
            problems = ui_panel_specs.check_spec(spec)
            if not problems:
                problems = _webview_page_problems(spec, relative, files) + _duplicate_id(spec, seen)
            for where, problem in problems[:10]:
                bag.error("ui-spec-invalid", f"{relative}: {where or '(the spec)'}: {problem}", file=file, field_path=path,
                          hint="docs/ui.md lists the panel fields, the components and how bindings are written")
            if not problems:
                panels.append((location, relative, spec))
    return panels


def _webview_page_problems(spec: dict[str, Any], relative: str, files: PackageFiles) -> list[tuple[str, str]]:
    """A webview's page must be a file inside the package (its path is relative to the spec file)."""
    webview = ui_panel_specs.webview_of(spec)
    if webview is None:
        return []
    page = files.relative(relative, webview[0])
    if page is None:
        return [("webview.src", f"`{webview[0]}` points outside the package")]
    if not files.is_file(page):
        return [("webview.src", f"`{webview[0]}` does not exist (looked for {page})")]
    return []


def _duplicate_id(spec: dict[str, Any], seen: set[str]) -> list[tuple[str, str]]:
    panel_id = spec.get("id")
    if not isinstance(panel_id, str):
        return []
    if panel_id in seen:
        return [("id", f"another panel of this plugin is `{panel_id}` already; a panel id is unique in its plugin")]
    seen.add(panel_id)
    return []


def check_runtime_schemas(runtime: CompiledRuntime, files: PackageFiles, bag: DiagnosticBag) -> None:
    prefix = "runtime." if runtime.file == "PLUGIN.md" else ""
    io = runtime.manifest["io"]
    for binding, spec in io["inputs"].items():
        if "accepts" in spec:
            check_schema(spec["accepts"], files, bag, file=runtime.file, field_path=f"{prefix}io.inputs.{binding}.accepts", what="accepts schema")
    output_schema = io["output"].get("schema")
    if output_schema is not None:
        check_schema(output_schema, files, bag, file=runtime.file, field_path=f"{prefix}io.output.schema", what="output schema")
    if isinstance(io.get("payloadSchema"), str):
        check_schema(io["payloadSchema"], files, bag, file=runtime.file, field_path=f"{prefix}io.payloadSchema", what="payload schema")
