"""What the registry serves of a package, compiled from its manifest: the derived tags, the compiled
contributes and the lists taken from it, the contracts it provides, and the definition.
"""

from __future__ import annotations

from typing import Any

from services.registry.contributes_rules import event_topics
from services.registry.diagnostics import DiagnosticBag
from services.registry.loaded_package import LoadedPackage
from services.registry.manifest_models import (
    Contributes,
    ExtensionDecl,
    HookDecl,
    PluginManifest,
    ProvidesDecl,
    ServiceDecl,
)
from services.registry.manifest_reading import PLUGIN_FILE
from services.registry.runtime_compiler import CompiledRuntime

DERIVED_TAG_PREFIXES = ("cost:", "ui:")


def derived_tags(author_tags: list[str], runtimes: list[CompiledRuntime], entry: str, contributes: Contributes | None) -> list[str]:
    tags = [tag for tag in author_tags if not tag.startswith(DERIVED_TAG_PREFIXES)]
    derived: list[str] = []
    calls_model = any(rt.type == "agent" or rt.manifest.get("function", {}).get("model") for rt in runtimes)
    plain_function = any(rt.type == "function" and not rt.manifest["function"].get("model") for rt in runtimes)
    projections = bool(contributes and contributes.worldProjections)
    if calls_model:
        derived.append("cost:llm")
    if plain_function or (not runtimes and (entry or projections)):
        derived.append("cost:function")
    ui = (contributes.ui if contributes else None) or {}
    if ui.get("right"):
        derived.append("ui:right-panel")
    if ui.get("message"):
        derived.append("ui:message-block")
    manual = any(rt.trigger_type == "manual" and not rt.manifest["schedule"]["subagentOnly"] for rt in runtimes)
    if manual or (contributes and (contributes.actions or contributes.commands)):
        derived.append("ui:manual-action")
    return list(dict.fromkeys([*tags, *derived]))


def compile_contributes(contributes: Contributes | None) -> dict[str, Any]:
    if contributes is None:
        return {}
    compiled = contributes.model_dump(by_alias=True, exclude_none=True)
    if contributes.hooks is not None:
        compiled["hooks"] = [
            {"event": hook.event, "enforce": hook.enforce or "normal"}
            if isinstance(hook, HookDecl)
            else {"event": hook, "enforce": "normal"}
            for hook in contributes.hooks
        ]
    if contributes.services is not None:
        compiled["services"] = [
            {"modelFacing": False, "access": "read", **item.model_dump(exclude_none=True)}
            if isinstance(item, ServiceDecl)
            else {"contract": item, "modelFacing": False, "access": "read"}
            for item in contributes.services
        ]
    if contributes.data is not None:
        compiled["data"] = {
            namespace: {"version": 1, **decl.model_dump(by_alias=True, exclude_none=True)}
            for namespace, decl in contributes.data.items()
        }
    if contributes.prompt is not None:
        compiled["prompt"] = [
            {"role": "system", **segment.model_dump(by_alias=True, exclude_none=True)} for segment in contributes.prompt
        ]
    if contributes.extensions is not None:
        extensions = []
        for item in contributes.extensions:
            if isinstance(item, ExtensionDecl):
                extensions.append({"order": 0, **item.model_dump(exclude_none=True)})
            else:
                point, _, ext_id = item.rpartition("/")
                extensions.append({"point": point, "id": ext_id, "order": 0})
        compiled["extensions"] = extensions
    return compiled


def provided_contracts(manifest: PluginManifest, runtimes: list[CompiledRuntime], bag: DiagnosticBag) -> tuple[list[str], list[str]]:
    """(provides, the ones it is the default provider of): written provides + each runtime's
    io.output.contract; two runtimes cannot share one."""
    provides: list[str] = []
    defaults: list[str] = []
    for item in manifest.provides or []:
        contract = item.contract if isinstance(item, ProvidesDecl) else item
        if contract not in provides:
            provides.append(contract)
        if isinstance(item, ProvidesDecl) and item.default:
            defaults.append(contract)
    producers: dict[str, str] = {}
    for runtime in runtimes:
        contract = runtime.output_contract
        if not contract:
            continue
        if contract in producers:
            bag.error(
                "ambiguous-output-contract",
                f"runtimes {producers[contract]} and {runtime.runtime_id} both output {contract}",
                file=runtime.file,
                field_path=("runtime." if runtime.file == PLUGIN_FILE else "") + "io.output.contract",
            )
            continue
        producers[contract] = runtime.runtime_id
        if contract not in provides:
            provides.append(contract)
    return provides, defaults


def contributes_of(
    package: LoadedPackage, manifest: PluginManifest, datasets: dict[str, dict[str, Any]], action_kinds: list[dict[str, Any]]
) -> dict[str, Any]:
    """The compiled contributes; the package's hook, tool, action, service, extension, form and topic lists from it."""
    contributes = compile_contributes(manifest.contributes)
    if datasets or "datasets" in contributes:
        contributes["datasets"] = datasets
    if action_kinds or "actionKinds" in contributes:
        contributes["actionKinds"] = action_kinds
    package.event_topics = event_topics(manifest)
    if "events" in contributes:
        contributes["events"] = [
            item if isinstance(item, dict) else {"topic": item} for item in contributes["events"]
        ]
    package.hooks = [(hook["event"], hook["enforce"]) for hook in contributes.get("hooks", [])]
    package.tools = list(contributes.get("tools", []))
    package.actions = list(contributes.get("actions", []))
    package.services = [item["contract"] for item in contributes.get("services", [])]
    package.extensions = [f"{item['point']}/{item['id']}" for item in contributes.get("extensions", [])]
    package.forms = list(contributes.get("forms", []))
    return contributes


def package_definition(
    package: LoadedPackage, manifest: PluginManifest, contributes: dict[str, Any], locales: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The package's compiled definition (what the registry serves)."""
    definition: dict[str, Any] = {
        "id": package.id,
        "kind": package.kind,
        "version": package.version,
        "displayName": package.display_name,
        "description": package.description,
        "tags": package.tags,
        "provides": [{"contract": contract, "default": contract in package.default_provides} for contract in package.provides],
        "requires": package.requires,
        "conflicts": package.conflicts,
        "contracts": {key: value.model_dump(by_alias=True) for key, value in (manifest.contracts or {}).items()},
        "contributes": contributes,
        "runtimes": [runtime.runtime_id for runtime in package.runtimes],
        "source": package.source,
    }
    if package.entry:
        definition["entry"] = package.entry
    if locales:
        definition["locales"] = locales
    if package.prompt_segment_variants:
        # Captured with the definition: the scheduler picks the session's locale from this snapshot.
        definition["promptSegmentVariants"] = package.prompt_segment_variants
    for optional in ("license", "homepage", "covel"):
        value = getattr(manifest, optional)
        if value is not None:
            definition[optional] = value
    if manifest.author is not None:
        definition["author"] = manifest.author if isinstance(manifest.author, str) else manifest.author.model_dump(exclude_none=True)
    if manifest.permissions is not None:
        definition["permissions"] = manifest.permissions.model_dump(exclude_none=True)
    return definition
