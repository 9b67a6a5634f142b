"""`contributes.datasets` and `agent.tools.datasets`: names, schema files, keys, ops and generated tools.

A dataset is a namespace of this package's plugin data plus the JSON Schema every record
must meet. The compiled declaration always carries namespace, schema, ops and tools (key and
description only when written); it is copied into every runtime manifest of the package.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from services.registry.diagnostics import DiagnosticBag
from services.registry.manifest_fields import DATASET_OPS
from services.registry.manifest_models import DataDecl, DatasetDecl
from services.registry.package_files import PackageFiles
from services.registry.runtime_compiler import CompiledRuntime

DATASET_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
MAX_TOOL_NAME = 64
# Tools the framework gives agents itself; no plugin or dataset tool may take these names.
FRAMEWORK_TOOLS = frozenset({"runtime-done", "delegate", "suspend", "emit-event", "world-dimension-get", "world-dimension-list",
                             "update-dimensions"})


def dataset_tool_name(dataset: str, tool: str) -> str:
    return f"{dataset}-{tool}"


def derived_tools(ops: list[str]) -> list[str]:
    """`tools` when not written: always get and list; upsert with set; update with any other op."""
    tools = ["get", "list"]
    if "set" in ops:
        tools.append("upsert")
    if any(op != "set" for op in ops):
        tools.append("update")
    return tools


def _duplicates(items: Iterable[str]) -> list[str]:
    """Each item seen before, once per repeat."""
    seen: set[str] = set()
    repeated = []
    for item in items:
        if item in seen:
            repeated.append(item)
        seen.add(item)
    return repeated


def compile_datasets(
    datasets: dict[str, DatasetDecl] | None,
    data: dict[str, DataDecl] | None,
    files: PackageFiles,
    bag: DiagnosticBag,
    *,
    file: str,
) -> dict[str, dict[str, Any]]:
    compiled: dict[str, dict[str, Any]] = {}
    for name, decl in (datasets or {}).items():
        path = f"contributes.datasets.{name}"
        before = len(bag)
        _check_dataset_name(name, bag, file=file, path=path)
        relative = _dataset_schema(decl, files, bag, file=file, path=path)
        ops = _dataset_ops(decl, bag, file=file, path=path)
        tools = _dataset_tools(decl, ops, bag, file=file, path=path)
        _check_one_schema_per_namespace(name, (data or {}).get(name), relative, files, bag, file=file, path=path)
        if bag.errors_since(before):
            continue
        entry: dict[str, Any] = {"namespace": name, "schema": relative, "ops": ops, "tools": tools}
        if decl.key is not None:
            entry["key"] = decl.key
        if decl.description is not None:
            entry["description"] = decl.description
        compiled[name] = entry
    return compiled


def _check_dataset_name(name: str, bag: DiagnosticBag, *, file: str, path: str) -> None:
    if name.startswith("_"):
        bag.error(
            "reserved-namespace",
            f"`{name}`: namespaces that start with `_` are reserved for the kernel",
            file=file,
            field_path=path,
            hint="name the dataset with a leading letter",
        )
    elif not DATASET_NAME.match(name):
        bag.error(
            "invalid-dataset-name",
            f"`{name}` is not a dataset name: a letter, then letters, digits, `_` or `-`; at most 64",
            file=file,
            field_path=path,
        )


def _dataset_schema(decl: DatasetDecl, files: PackageFiles, bag: DiagnosticBag, *, file: str, path: str) -> str | None:
    """The schema file (package-relative) once it is a readable JSON object; its key checked against it."""
    schema_path = f"{path}.schema"
    if not decl.schema_.endswith(".json"):
        bag.error(
            "dataset-schema-not-json",
            f"the dataset schema `{decl.schema_}` must be a .json file in the package",
            file=file,
            field_path=schema_path,
        )
        return None
    relative, document = files.json_file(
        decl.schema_, bag, file=file, field_path=schema_path, what="dataset schema", require_object=True
    )
    if isinstance(document, dict) and decl.key is not None and isinstance(document.get("properties"), dict):
        _check_key(decl.key, document, relative, bag, file=file, path=path)
    return relative


def _check_key(key: str, document: dict[str, Any], relative: str | None, bag: DiagnosticBag, *, file: str, path: str) -> None:
    properties = document["properties"]
    required = document.get("required")
    if key not in properties:
        bag.error(
            "dataset-key-unknown",
            f"key `{key}` is not a top-level property of {relative}",
            file=file,
            field_path=f"{path}.key",
            hint=f"one of: {', '.join(sorted(properties)) or '(none)'}",
        )
    elif not isinstance(required, list) or key not in required:
        bag.error(
            "dataset-key-not-required",
            f"key `{key}` must be listed in the schema's top-level `required`",
            file=file,
            field_path=f"{path}.key",
            hint=f'add "{key}" to "required" in {relative}',
        )


def _dataset_ops(decl: DatasetDecl, bag: DiagnosticBag, *, file: str, path: str) -> list[str]:
    ops: list[str] = list(decl.ops) if decl.ops is not None else list(DATASET_OPS)
    if decl.ops is not None and not decl.ops:
        bag.error("dataset-ops-empty", "ops, when written, cannot be empty", file=file, field_path=f"{path}.ops", hint="remove `ops` to allow every operation")
    for duplicate in dict.fromkeys(_duplicates(ops)):
        bag.error("dataset-ops-duplicate", f"`{duplicate}` is listed twice in ops", file=file, field_path=f"{path}.ops")
    return ops


def _dataset_tools(decl: DatasetDecl, ops: list[str], bag: DiagnosticBag, *, file: str, path: str) -> list[str]:
    """The written tools, checked against ops; else the tools derived from ops."""
    if decl.tools is None:
        return derived_tools(ops)
    tools: list[str] = list(decl.tools)
    if not tools:
        bag.error("dataset-tools-empty", "tools, when written, cannot be empty", file=file, field_path=f"{path}.tools", hint="remove `tools` to derive them from ops")
    for duplicate in dict.fromkeys(_duplicates(tools)):
        bag.error("dataset-tools-duplicate", f"`{duplicate}` is listed twice in tools", file=file, field_path=f"{path}.tools")
    if "upsert" in tools and "set" not in ops:
        bag.error(
            "dataset-tool-without-op",
            "tool `upsert` writes whole records, but ops has no `set`",
            file=file,
            field_path=f"{path}.tools",
            hint="add `set` to ops, or remove `upsert` from tools",
        )
    if "update" in tools and ops and all(op == "set" for op in ops):
        bag.error(
            "dataset-tool-without-op",
            "tool `update` applies operations, but ops has only `set`",
            file=file,
            field_path=f"{path}.tools",
            hint="add an operation such as merge to ops, or remove `update` from tools",
        )
    return tools


def _check_one_schema_per_namespace(
    name: str, data_decl: DataDecl | None, relative: str | None, files: PackageFiles, bag: DiagnosticBag, *, file: str, path: str
) -> None:
    if data_decl is None or data_decl.schema_ is None or relative is None:
        return
    if files.relative(file, data_decl.schema_) != relative:
        bag.error(
            "dataset-schema-mismatch",
            f"contributes.data.{name}.schema and the dataset's schema name different files; a namespace has one schema",
            file=file,
            field_path=f"{path}.schema",
            hint=f"point both at {relative}",
        )


def check_agent_datasets(
    runtime: CompiledRuntime,
    datasets: dict[str, dict[str, Any]],
    declared_names: set[str],
    contributed_tools: list[str],
    bag: DiagnosticBag,
) -> None:
    """agent.tools.datasets against contributes.datasets; generated tool names short and unique."""
    agent = runtime.manifest.get("agent")
    if not agent:
        return
    prefix = "runtime." if runtime.file == "PLUGIN.md" else ""
    base = f"{prefix}agent.tools.datasets"
    taken = _taken_tool_names(agent, contributed_tools)
    seen: set[str] = set()
    expanded: list[dict[str, Any]] = []
    for index, item in enumerate(agent["tools"]["datasets"]):
        name = item["dataset"]
        path = f"{base}[{index}]"
        if name in seen:
            bag.error("dataset-listed-twice", f"dataset `{name}` is listed twice", file=runtime.file, field_path=path)
            continue
        seen.add(name)
        if name not in datasets:
            if name not in declared_names:
                bag.error(
                    "unknown-dataset",
                    f"`{name}` is not declared in contributes.datasets",
                    file=runtime.file,
                    field_path=path,
                    hint=f"declared: {', '.join(sorted(declared_names)) or '(none)'}",
                )
            continue
        provided = datasets[name]["tools"]
        chosen = item.get("tools")
        if chosen is None:
            chosen = list(provided)
        _check_chosen_tools(runtime, name, path, chosen, provided, taken, bag)
        expanded.append({"dataset": name, "tools": [tool for tool in chosen if tool in provided]})
    agent["tools"]["datasets"] = expanded


def _taken_tool_names(agent: dict[str, Any], contributed_tools: list[str]) -> dict[str, str]:
    """Tool name -> what already has it, before any dataset tool is generated."""
    taken: dict[str, str] = {name: "a framework tool" for name in FRAMEWORK_TOOLS}
    for name in contributed_tools:
        taken.setdefault(name, "a tool in contributes.tools")
    for name in agent["tools"]["plugin"]:
        taken.setdefault(name, "a tool of agent.tools.plugin")
    for service in agent["tools"]["services"]:
        alias = service.get("as") or service["contract"]
        taken.setdefault(alias, f"the imported service tool of {service['contract']}")
    return taken


def _check_chosen_tools(
    runtime: CompiledRuntime,
    name: str,
    path: str,
    chosen: list[str],
    provided: list[str],
    taken: dict[str, str],
    bag: DiagnosticBag,
) -> None:
    """The tools one agent picks from a dataset: provided by it, and generated names short and unclaimed
    (`taken` gains the names generated here)."""
    for tool_index, tool in enumerate(chosen):
        if tool not in provided:
            bag.error(
                "dataset-tool-not-provided",
                f"dataset `{name}` does not provide `{tool}` (it provides {', '.join(provided)})",
                file=runtime.file,
                field_path=f"{path}.tools[{tool_index}]",
            )
    too_long = [dataset_tool_name(name, tool) for tool in chosen if tool in provided and len(dataset_tool_name(name, tool)) > MAX_TOOL_NAME]
    if too_long:
        bag.error(
            "tool-name-too-long",
            f"generated tool names longer than {MAX_TOOL_NAME} characters: {', '.join(f'`{item}`' for item in too_long)}",
            file=runtime.file,
            field_path=path,
            hint="use a shorter dataset name",
        )
    for tool in chosen:
        if tool not in provided:
            continue
        generated = dataset_tool_name(name, tool)
        if len(generated) > MAX_TOOL_NAME:
            continue
        if generated in taken:
            bag.error(
                "tool-name-collision",
                f"the generated tool `{generated}` has the same name as {taken[generated]}",
                file=runtime.file,
                field_path=path,
                hint="rename the dataset or the other tool",
            )
        else:
            taken[generated] = f"the tool generated for dataset `{name}`"
