"""Packages and runtimes for scheduler unit tests, compiled by the registry itself: a test writes
what an author would (a runtime's fields, a package's contributes) and gets what the scheduler
reads from its plugin cache, every default filled in by the registry's compiler."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from services.registry.package_loader import load_package
from services.registry.proto_mapping import package_to_proto
from services.scheduler.catalogue import Package, Runtime
from shared.manifest import CompiledManifest

_FOLDERS = tempfile.TemporaryDirectory(prefix="covel-compiled-")
_counter = 0


def _frontmatter(fields: dict[str, Any], body: str) -> str:
    return f"---\n{json.dumps(fields)}\n---\n{body}\n"  # JSON is YAML


def _with_schedule(author: dict[str, Any]) -> dict[str, Any]:
    """An auto runtime needs a stage; a test that does not say runs post-turn (story: narrative)."""
    if "schedule" in author:
        return author
    visibility = (author.get("io") or {}).get("visibility")
    return {**author, "schedule": {"stage": "narrative" if visibility == "story" else "post-turn"}}


def _plugin_tools(runtimes: dict[str, dict[str, Any]]) -> list[str]:
    names = [name for author in runtimes.values() for name in ((author.get("agent") or {}).get("tools") or {}).get("plugin") or []]
    # suspend is the kernel's tool an agent opts into, never a plugin's.
    return [name for name in dict.fromkeys(names) if name != "suspend"]


def compiled_package(plugin_id: str, runtimes: dict[str, dict[str, Any]] | None = None, *, package: dict[str, Any] | None = None,
                     prompts: dict[str, str] | None = None, files: dict[str, str] | None = None) -> Package:
    """Package `plugin_id` with `runtimes` (runtime id -> its fields as written; `plugin_id` itself
    for the inline runtime), root fields `package`, extra `files`; loaded as the registry loads it.
    Tools the runtimes list in agent.tools.plugin are added to contributes.tools."""
    global _counter
    _counter += 1
    root = Path(_FOLDERS.name) / str(_counter) / plugin_id
    root.mkdir(parents=True)
    runtimes = {runtime_id: _with_schedule(author) for runtime_id, author in (runtimes or {}).items()}
    fields: dict[str, Any] = {"version": "0.1.0", **(package or {})}
    contributes = dict(fields.get("contributes") or {})
    declared = list(contributes.get("tools") or [])
    missing = [name for name in _plugin_tools(runtimes) if name not in declared]
    if missing:
        fields["contributes"] = {**contributes, "tools": declared + missing}
    prompts = prompts or {}
    if plugin_id in runtimes:
        fields["runtime"] = runtimes.pop(plugin_id)
    (root / "PLUGIN.md").write_text(_frontmatter(fields, prompts.get(plugin_id, "")), encoding="utf-8")
    for runtime_id, author in runtimes.items():
        folder = root / "runtimes" / runtime_id.split("/", 1)[1]
        folder.mkdir(parents=True)
        (folder / "RUNTIME.md").write_text(_frontmatter(author, prompts.get(runtime_id, "Do the task.")), encoding="utf-8")
    for relative, text in (files or {}).items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")
    loaded = load_package(root, source="community")
    assert loaded.loaded, [str(diagnostic) for diagnostic in loaded.diagnostics]
    return Package.from_proto(package_to_proto(loaded))


def compiled_runtime(author: dict[str, Any] | None = None, *, runtime_id: str = "probe/agent", visibility: str = "system",
                     prompt: str = "Do the task.", package: dict[str, Any] | None = None,
                     files: dict[str, str] | None = None) -> Runtime:
    """One runtime as written (`author`), `visibility` unless it writes io.visibility, compiled in a package of its own."""
    author = dict(author or {})
    author["io"] = {"visibility": visibility, **(author.get("io") or {})}
    plugin_id = runtime_id.split("/", 1)[0]
    built = compiled_package(plugin_id, {runtime_id: author}, package=package, prompts={runtime_id: prompt}, files=files)
    return next(runtime for runtime in built.runtimes if runtime.runtime_id == runtime_id)


def compiled_manifest(author: dict[str, Any] | None = None, **options: Any) -> CompiledManifest:
    return compiled_runtime(author, **options).manifest
