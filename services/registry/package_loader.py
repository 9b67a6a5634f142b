"""Load one plugin package folder: layout, manifests, variants, derived values, diagnostics.

The result is always a `LoadedPackage`: with error diagnostics it is FAILED (kept so the
catalogue can show why), otherwise LOADED with its compiled runtimes. Nothing here runs
plugin code; files are only read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from services.registry.action_kinds import compile_action_kinds
from services.registry.authoring_warnings import root_warnings, runtime_warnings
from services.registry.code_paths import resolve_code_file
from services.registry.compile_scope import RuntimeSource
from services.registry.contributes_rules import (
    check_contributes,
    check_projection_handlers,
    check_runtime_tools,
    check_story_requires,
    check_unserved,
)
from services.registry.dataset_rules import check_agent_datasets, compile_datasets
from services.registry.dependency_warnings import warn_dependency_cycles
from services.registry.diagnostics import (
    DiagnosticBag,
    add_validation_errors,
    has_errors,
)
from services.registry.frontmatter import Document, parse_document
from services.registry.host_compatibility import host_version, parse_range, satisfies
from services.registry.loaded_package import DEFAULT_VERSION, LoadedPackage, PackageState
from services.registry.locale_files import compile_locales, inline_locale_maps
from services.registry.manifest_fields import PLUGIN_ID, RESERVED_PLUGIN_IDS
from services.registry.manifest_models import PluginManifest
from services.registry.manifest_reading import (
    KNOWN_FIELDS,
    PLUGIN_FILE,
    RUNTIME_FILE,
    RUNTIMES_DIR,
    clean_root,
    exact_child,
    is_inside_file,
    package_relative,
    read_text,
)
from services.registry.package_definition import contributes_of, derived_tags, package_definition, provided_contracts
from services.registry.package_files import PackageFiles
from services.registry.prompt_variants import Variant, locale_variants
from services.registry.runtime_compiler import compile_runtime
from services.registry.runtime_files import RuntimeFile, discover_runtime_files
from services.registry.schema_references import check_root_schemas, check_runtime_schemas
from services.registry.served_manifests import check_served_manifests
from services.registry.settings import BUILTIN

DEFAULT_ENTRY = "server/index.py"
# Only Simplified Chinese has prompt variants; other locale files are not read.
IGNORED_FILES = ("llm.toml",)


def _check_runtime_references(package: LoadedPackage, declared_ids: set[str], bag: DiagnosticBag) -> None:
    """needs / after / inputs.from.runtime may name only runtimes of this package, fully qualified."""
    for runtime in package.runtimes:
        prefix = "runtime." if runtime.file == PLUGIN_FILE else ""
        refs: list[tuple[str, str]] = []
        for group in ("needs", "after"):
            for index, item in enumerate(runtime.manifest["schedule"][group]):
                if "runtime" in item:
                    refs.append((item["runtime"], f"{prefix}schedule.{group}[{index}]"))
        for binding, spec in runtime.manifest["io"]["inputs"].items():
            if "runtime" in spec["from"]:
                refs.append((spec["from"]["runtime"], f"{prefix}io.inputs.{binding}.from.runtime"))
        for target, path in refs:
            if target in declared_ids:
                continue
            owner = target.split("/", 1)[0]
            if "/" not in target and target != package.id:
                code, message, hint = (
                    "unqualified-runtime-reference",
                    f"`{target}` is not a full runtime id",
                    f"write `{package.id}/{target}`",
                )
            elif owner != package.id:
                code, message, hint = (
                    "cross-package-runtime-reference",
                    f"`{target}` belongs to another package; depend on other packages through contracts",
                    "use `contract:` (from.contract / needs[].contract) instead",
                )
            else:
                code, message, hint = (
                    "unknown-runtime-reference",
                    f"this package has no runtime `{target}`",
                    f"one of: {', '.join(sorted(declared_ids)) or '(none)'}",
                )
            bag.error(code, message, file=runtime.file, field_path=path, hint=hint)


def _validation_advice(
    root: Path, data: dict[str, Any], package: LoadedPackage, raw_runtimes: dict[str, Any], bag: DiagnosticBag
) -> None:
    """Warnings only validation gives: defaults written out, longer forms, files that are never read."""
    root_warnings(
        data,
        folder_name=package.id,
        default_entry_exists=is_inside_file(root, DEFAULT_ENTRY),
        output_contracts={runtime.output_contract for runtime in package.runtimes if runtime.output_contract},
        has_setup_runtime=any(runtime.stage == "setup" for runtime in package.runtimes),
        has_entry=bool(package.entry),
        derived_tags=package.tags,
        bag=bag,
        file=PLUGIN_FILE,
    )
    for runtime in package.runtimes:
        runtime_warnings(raw_runtimes.get(runtime.runtime_id), runtime, bag, prefix="runtime" if runtime.file == PLUGIN_FILE else "")
    warn_dependency_cycles(package.runtimes, bag)
    for name in IGNORED_FILES:
        if exact_child(root, name)[0]:
            bag.info("ignored-file", f"{name} is not read: models are chosen by the player's model settings", file=name)


def load_package(root: Path, *, source: str, strict: bool = False) -> LoadedPackage:
    """Load the package in folder `root`; `strict` turns droppable problems into errors."""
    plugin_id = root.name
    bag = DiagnosticBag(plugin_id=plugin_id, file=PLUGIN_FILE)
    package = LoadedPackage(id=plugin_id, root_dir=root.resolve(), source=source, state=PackageState.FAILED, diagnostics=bag.items)
    _check_package_id(plugin_id, bag)
    document = _read_manifest_document(root, bag)
    if document is None:
        return package
    package.prompt = document.body
    root_variants = locale_variants(root, PLUGIN_FILE, document, bag, root)
    package.prompt_variants = {locale: variant.body for locale, variant in root_variants.items() if variant.body}
    package.prompt_segment_variants = {locale: variant.segments for locale, variant in root_variants.items() if variant.segments}

    data = clean_root(inline_locale_maps(dict(document.data), bag, file=PLUGIN_FILE), bag, strict=strict)
    try:
        manifest = PluginManifest.model_validate(data)
    except ValidationError as error:
        add_validation_errors(bag, error.errors(), data, file=PLUGIN_FILE, known_fields=KNOWN_FIELDS)
        manifest = None

    runtime_files, has_runtime_folders = discover_runtime_files(root, plugin_id, bag, strict=strict)
    if manifest is None:
        return package

    _check_manifest_header(manifest, plugin_id, bag)
    package.kind = _trusted_kind(manifest.kind, source, bag)
    package.version = manifest.version or DEFAULT_VERSION
    package.display_name = manifest.displayName or plugin_id
    package.description = manifest.description or ""
    package.entry = _entry_module(root, manifest, bag)

    contributed_tools = list(manifest.contributes.tools or []) if manifest.contributes else []
    runtimes = _compile_runtimes(
        package, root, manifest, document, data, root_variants, runtime_files, has_runtime_folders, contributed_tools, bag, strict=strict
    )
    _check_runtime_references(package, runtimes.declared_ids, bag)
    datasets, action_kinds = _static_checks(package, PackageFiles(root), manifest, contributed_tools, bag)
    locales = compile_locales(root, runtimes.frontmatters, bag, strict=strict)

    package.provides, package.default_provides = provided_contracts(manifest, package.runtimes, bag)
    package.requires = list(manifest.requires or [])
    package.conflicts = list(manifest.conflicts or [])
    package.tags = derived_tags(list(manifest.tags or []), package.runtimes, package.entry, manifest.contributes)
    contributes = contributes_of(package, manifest, datasets, action_kinds)
    if strict:
        _validation_advice(root, data, package, runtimes.raw, bag)
    package.definition = package_definition(package, manifest, contributes, locales)
    if not has_errors(bag.items):
        check_served_manifests(package, bag)
    if has_errors(bag.items):
        # A failed package never runs: its runtimes are listed in the definition only.
        package.state = PackageState.FAILED
        package.runtimes = []
    else:
        package.state = PackageState.LOADED
    return package


def _check_package_id(plugin_id: str, bag: DiagnosticBag) -> None:
    if not PLUGIN_ID.match(plugin_id):
        bag.error(
            "invalid-id",
            f"`{plugin_id}` is not a valid plugin id: lowercase letters, digits, `.`, `_` and `-`, at most 64",
            file="",
            hint="rename the package folder",
        )
    if plugin_id in RESERVED_PLUGIN_IDS:
        bag.error("reserved-id", f"`{plugin_id}` is reserved for the framework", file="", hint="rename the package folder")


# A Covel collection's manifest: a folder of packages and worlds with author info, which this kernel does not read.
COLLECTION_FILE = "covel-collection.yaml"


def _read_manifest_document(root: Path, bag: DiagnosticBag) -> Document | None:
    """PLUGIN.md parsed (frontmatter and body); None, with the reason in `bag`, when there is none to read."""
    present, wrong = exact_child(root, PLUGIN_FILE)
    if not present and (root / COLLECTION_FILE).is_file():
        bag.error(
            "collection-unsupported",
            f"a Covel collection ({COLLECTION_FILE}), not a package: this kernel reads no collections, nor their author info",
            file=COLLECTION_FILE,
            hint="put each of its plugin packages in a plugin folder and each world in a world folder (their own author info is "
                 "shown); group plugins for worlds with the operator's pack files (docs/worlds.md, Plugin policy and packs)",
        )
        return None
    if not present:
        bag.error(
            "plugin-manifest-missing",
            f"the package has no {PLUGIN_FILE}" + (f" (found `{wrong}`)" if wrong else ""),
            file=wrong or PLUGIN_FILE,
            hint=f"add {PLUGIN_FILE} at the package root" if not wrong else f"rename `{wrong}` to {PLUGIN_FILE}",
        )
        return None
    text = read_text(root / PLUGIN_FILE, bag, PLUGIN_FILE)
    return parse_document(text, bag, PLUGIN_FILE) if text is not None else None


def _trusted_kind(written: str | None, source: str, bag: DiagnosticBag) -> str:
    """`kind: core` (joins every session unasked) is for packages of the operator's builtin folders
    only: a community package is a plugin whatever it claims, so it joins only sessions that ask
    for it, and its code runs once the player approves it (issue 18)."""
    if written == "core" and source != BUILTIN:
        bag.warning(
            "core-not-builtin",
            "`kind: core` is ignored: only packages in the operator's builtin plugin folders are core; this "
            "community package is loaded as a plugin (it joins sessions that request it, its code runs once approved)",
            field_path="kind",
            hint="drop `kind: core`, or ask the operator to put the package in a builtin folder (COVEL_BUILTIN_PLUGIN_DIRS)",
        )
        return "plugin"
    return written or "plugin"


def _check_manifest_header(manifest: PluginManifest, plugin_id: str, bag: DiagnosticBag) -> None:
    """`id` (when written) is the folder's name; `covel` is a range this host satisfies."""
    if manifest.id is not None and manifest.id != plugin_id:
        bag.error(
            "id-mismatch",
            f"id `{manifest.id}` differs from the package folder `{plugin_id}`",
            field_path="id",
            hint=f"remove `id`, or rename the folder to `{manifest.id}`",
        )
    if manifest.covel is None:
        return
    comparators = parse_range(manifest.covel)
    if comparators is None:
        bag.error(
            "invalid-host-range",
            f"`{manifest.covel}` is not a host version range",
            field_path="covel",
            hint='write comparators such as ">=0.1.0" or ">=0.1.0 <0.3"',
        )
    elif not satisfies(host_version(), comparators):
        bag.error(
            "host-version-unsupported",
            f"the package is for Covel {manifest.covel}; this host is {host_version()}",
            field_path="covel",
            hint="install a version of the package written for this host",
        )


def _entry_module(root: Path, manifest: PluginManifest, bag: DiagnosticBag) -> str:
    """entry: written -> must be a file inside the package; else server/index.py when present ("" for none)."""
    if manifest.entry is None:
        return DEFAULT_ENTRY if is_inside_file(root, DEFAULT_ENTRY) else ""
    entry = package_relative(root, manifest.entry)
    if entry is None:
        bag.error(
            "entry-outside-package",
            f"entry `{manifest.entry}` points outside the package",
            field_path="entry",
            hint="write a path relative to the package root, e.g. server/index.py",
        )
        return ""
    entry = resolve_code_file(
        entry, lambda relative: is_inside_file(root, relative), bag, written=manifest.entry, file=PLUGIN_FILE, field_path="entry"
    )
    if is_inside_file(root, entry):
        return entry
    bag.error("entry-missing", f"entry `{manifest.entry}` does not exist in the package", field_path="entry")
    return ""


@dataclass
class _PackageRuntimes:
    """What compiling a package's runtimes leaves for the later checks."""

    declared_ids: set[str] = field(default_factory=set)
    # runtime id -> its frontmatter as written (strict-mode advice).
    raw: dict[str, Any] = field(default_factory=dict)
    # file -> its frontmatter (locale checks).
    frontmatters: dict[str, dict[str, Any]] = field(default_factory=dict)


def _compile_runtimes(
    package: LoadedPackage,
    root: Path,
    manifest: PluginManifest,
    document: Document,
    data: dict[str, Any],
    root_variants: dict[str, Variant],
    runtime_files: list[RuntimeFile],
    has_runtime_folders: bool,
    contributed_tools: list[str],
    bag: DiagnosticBag,
    *,
    strict: bool,
) -> _PackageRuntimes:
    """Runtimes: inline XOR runtimes/<id>/RUNTIME.md; the compiled ones are appended to package.runtimes."""
    if manifest.runtime is not None and has_runtime_folders:
        bag.error(
            "runtime-layout-mixed",
            f"the package declares an inline `runtime` and also has {RUNTIMES_DIR}/ folders",
            field_path="runtime",
            hint=f"move the inline runtime to {RUNTIMES_DIR}/<id>/{RUNTIME_FILE}, or remove {RUNTIMES_DIR}/",
        )
    found = _PackageRuntimes(frontmatters={PLUGIN_FILE: document.data})

    def source(runtime_id: str, file: str, *, inline: bool) -> RuntimeSource:
        return RuntimeSource(
            plugin_id=package.id,
            runtime_id=runtime_id,
            package_root=root,
            file=file,
            prefix="runtime" if inline else "",
            inline=inline,
            plugin_version=package.version,
            contributed_tools=contributed_tools,
            strict=strict,
        )

    if manifest.runtime is not None:
        found.raw[package.id] = data.get("runtime")
        found.declared_ids.add(package.id)
        compiled = compile_runtime(
            manifest.runtime, source(package.id, PLUGIN_FILE, inline=True), bag, prompt=document.body, prompt_variants=package.prompt_variants
        )
        if compiled:
            package.runtimes.append(compiled)
        return found
    _warn_unused_variant_bodies(root_variants, bag)
    for runtime_file in runtime_files:
        found.declared_ids.add(runtime_file.runtime_id)
        found.raw[runtime_file.runtime_id] = runtime_file.document.data
        found.frontmatters[runtime_file.file] = runtime_file.document.data
        if runtime_file.decl is None:
            continue
        variants = {
            locale: variant.body
            for locale, variant in locale_variants(runtime_file.folder, RUNTIME_FILE, runtime_file.document, bag, root).items()
            if variant.body
        }
        compiled = compile_runtime(
            runtime_file.decl,
            source(runtime_file.runtime_id, runtime_file.file, inline=False),
            bag,
            prompt=runtime_file.document.body,
            prompt_variants=variants,
        )
        if compiled:
            package.runtimes.append(compiled)
    return found


def _warn_unused_variant_bodies(root_variants: dict[str, Variant], bag: DiagnosticBag) -> None:
    for variant in root_variants.values():
        if variant.body:
            # The body of PLUGIN.<locale>.md translates the inline runtime's prompt; without one nothing reads it.
            bag.warning(
                "variant-body-unused",
                f"the body of {variant.file} is never read: it translates the inline runtime's prompt and "
                "this package has no inline runtime",
                file=variant.file,
                hint="translate the fixed segments in the variant's frontmatter, in order: contributes.prompt: "
                "[{content: <translation>}]",
            )


def _static_checks(
    package: LoadedPackage, files: PackageFiles, manifest: PluginManifest, contributed_tools: list[str], bag: DiagnosticBag
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Static checks over files and contributes (nothing is executed); the compiled datasets and action kinds."""
    declared = manifest.contributes
    package.ui_panels = check_root_schemas(manifest, files, bag, file=PLUGIN_FILE)
    check_contributes(manifest, bag, file=PLUGIN_FILE)
    check_projection_handlers(declared.worldProjections if declared else None, files, bag, file=PLUGIN_FILE)
    check_unserved(declared, bag, file=PLUGIN_FILE)
    datasets = compile_datasets(
        declared.datasets if declared else None, declared.data if declared else None, files, bag, file=PLUGIN_FILE
    )
    action_kinds = compile_action_kinds(declared.actionKinds if declared else None, package.id, files, bag, file=PLUGIN_FILE)
    declared_datasets = set(declared.datasets or {}) if declared else set()
    for runtime in package.runtimes:
        check_runtime_schemas(runtime, files, bag)
        check_agent_datasets(runtime, datasets, declared_datasets, contributed_tools, bag)
        check_runtime_tools(runtime, contributed_tools, bag)
        runtime.manifest["datasets"] = datasets
    check_story_requires(manifest, package.runtimes, bag, file=PLUGIN_FILE)
    return datasets, action_kinds
