"""The compiled manifest and definition fit shared/manifest's models, through the wire and back;
a compiled value that does not fit fails the package in the registry, naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from covel.registry.v1 import registry_pb2
from services.registry import agent_compiler, runtime_defaults
from services.registry.loaded_package import PackageState
from services.registry.package_loader import load_package
from shared.manifest import CompiledManifest, KernelInput, ManifestError, PackageDefinition, parse_definition, parse_manifest
from shared.settings import default_plugin_dirs
from shared.structs import from_struct
from tests.registry.conftest import write_plugin

BUILTIN = sorted(path for path in default_plugin_dirs()[0].iterdir() if (path / "PLUGIN.md").is_file())


@pytest.mark.parametrize("root", BUILTIN, ids=[path.name for path in BUILTIN])
def test_a_builtin_package_round_trips_through_the_wire(root: Path) -> None:
    from services.registry.proto_mapping import package_to_proto

    package = load_package(root, source="builtin")
    assert package.state is PackageState.LOADED, [str(d) for d in package.diagnostics]
    served = package_to_proto(package)
    assert isinstance(package.compiled_definition, PackageDefinition)
    assert parse_definition(from_struct(served.definition)) == package.compiled_definition
    assert package.compiled_definition.to_json() == package.definition
    for runtime, wire in zip(package.runtimes, served.runtimes, strict=True):
        assert isinstance(runtime.compiled, CompiledManifest)
        assert runtime.compiled.to_json() == runtime.manifest, "the typed form keeps every compiled key"
        assert parse_manifest(from_struct(wire.manifest)) == runtime.compiled, "Struct numbers read back as the same values"


def test_the_narrator_reads_as_typed_attributes() -> None:
    narrator = load_package(default_plugin_dirs()[0] / "narrator", source="builtin")
    [runtime] = narrator.runtimes
    manifest = runtime.compiled
    assert manifest is not None
    loop = manifest.agent_part.loop
    assert (loop.timeout_ms, loop.call_timeout_ms, loop.max_retries, loop.max_steps) == (240_000, 120_000, 1, 8)
    assert loop.corrections.output_repair == runtime_defaults.DEFAULT_CORRECTIONS["outputRepair"]
    assert manifest.schedule.trigger.type == "auto" and not manifest.is_detached
    assert manifest.io.visibility == "story" and manifest.io.output.contract == "narrative-engine@2"
    with pytest.raises(TypeError, match="narrator is an agent runtime; it has no function block"):
        _ = manifest.function_part


def test_kernel_inputs_and_bindings_are_told_apart(tmp_path: Path) -> None:
    root = write_plugin(tmp_path, "reader", """
        runtime:
          schedule: {stage: post-turn}
          io:
            inputs:
              digest: {from: {kernel: turn-digest@1}}
              story: {from: {contract: narrative-engine@2}, select: /segments}
    """, body="Read.")
    package = load_package(root, source="community")
    [runtime] = package.runtimes
    assert runtime.compiled is not None
    assert isinstance(runtime.compiled.io.inputs["digest"], KernelInput)
    assert runtime.compiled.io.kernel_inputs() == {"turn-digest@1"}
    story = runtime.compiled.io.bindings()["story"]
    assert (story.scope, story.required, story.select, story.from_.cardinality) == ("turn", True, "/segments", "one")


def test_a_function_gets_its_limits_from_the_registry(tmp_path: Path) -> None:
    root = write_plugin(tmp_path, "tally", """
        runtime:
          schedule: {stage: post-turn, detached: true}
          function: {}
          guard: ./guard.py
    """, files={"handler.py": "async def handler(ctx):\n    return {}\n", "guard.py": "def guard(ctx):\n    return {}\n"})
    [runtime] = load_package(root, source="community").runtimes
    assert runtime.compiled is not None
    function = runtime.compiled.function_part
    assert (function.model, function.slot, function.timeout_ms) == (None, "plugin", runtime_defaults.DEFAULT_FUNCTION_TIMEOUT_MS)
    assert runtime.compiled.guard_timeout_ms == runtime_defaults.DEFAULT_FUNCTION_TIMEOUT_MS
    detached = runtime.compiled.schedule.detached
    assert detached is not False and detached.max_settle_wait_ms == runtime_defaults.DEFAULT_SETTLE_WAIT_MS


def test_a_missing_required_field_is_named() -> None:
    narrator = load_package(default_plugin_dirs()[0] / "narrator", source="builtin")
    manifest: dict[str, Any] = dict(narrator.runtimes[0].manifest)
    manifest["agent"] = {**manifest["agent"], "loop": {k: v for k, v in manifest["agent"]["loop"].items() if k != "timeoutMs"}}
    with pytest.raises(ManifestError) as raised:
        parse_manifest(manifest)
    assert str(raised.value) == "the compiled manifest of narrator does not fit its model: agent.loop.timeoutMs: Field required"


def test_a_compile_bug_fails_the_package_in_the_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = agent_compiler.compile_loop

    def forgets_max_steps(scope: Any, visibility: str, *, subagent_only: bool) -> dict[str, Any]:
        return {k: v for k, v in real(scope, visibility, subagent_only=subagent_only).items() if k != "maxSteps"}

    monkeypatch.setattr(agent_compiler, "compile_loop", forgets_max_steps)
    root = write_plugin(tmp_path, "thinker", "runtime:\n  schedule: {stage: post-turn}", body="Think.")
    package = load_package(root, source="community")
    assert package.state is PackageState.FAILED and package.runtimes == []
    [diagnostic] = package.diagnostics
    assert diagnostic.code == "compiled-manifest-invalid" and diagnostic.file == "PLUGIN.md"
    assert "the compiled manifest of thinker does not fit its model: agent.loop.maxSteps: Field required" in diagnostic.message
    assert "registry bug" in diagnostic.hint
    from services.registry.proto_mapping import package_to_proto

    assert package_to_proto(package).state == registry_pb2.PLUGIN_STATE_FAILED
