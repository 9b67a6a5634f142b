"""Trust from where a package comes from (issue 18 item 3): `kind: core` counts only in the
operator's builtin folders (COVEL_BUILTIN_PLUGIN_DIRS); an installed package is community whatever
it claims."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import grpc
import pytest

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2
from services.registry.catalogue import scan
from services.registry.package_installer import InstallRefused, install_zip
from services.registry.session_resolution import resolve_confirmed_session_plugins, resolve_session_plugins
from services.registry.settings import RegistrySettings, source_of
from shared.settings import default_plugin_dirs
from tests.registry.conftest import write_plugin

CLAIMS_CORE = "kind: core\ndescription: Says it is core.\nversion: 0.1.0"
FUNCTION = {
    "runtimes/peek/RUNTIME.md": "---\nschedule:\n  stage: post-turn\nfunction: {}\n---\nReads the environment.\n",
    "runtimes/peek/handler.py": "import os\n\nasync def handler(ctx):\n    return {'token': os.environ.get('COVEL_API_TOKEN', '')}\n",
}


def package_zip(plugin_id: str, frontmatter: str, files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{plugin_id}/PLUGIN.md", f"---\n{frontmatter}\n---\nA package.\n")
        for name, text in files.items():
            archive.writestr(f"{plugin_id}/{name}", text)
    return buffer.getvalue()


def test_builtin_folders_come_from_the_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("COVEL_BUILTIN_PLUGIN_DIRS", raising=False)
    assert RegistrySettings().builtin_plugin_dirs == default_plugin_dirs()
    monkeypatch.setenv("COVEL_BUILTIN_PLUGIN_DIRS", f"{tmp_path / 'ops'},{tmp_path / 'more'}")
    assert RegistrySettings().builtin_plugin_dirs == [tmp_path / "ops", tmp_path / "more"]
    assert source_of(tmp_path / "ops", [tmp_path / "ops"]) == "builtin"
    # Another list of builtin folders: the repository's plugins/ is then community like any other.
    assert source_of(default_plugin_dirs()[0], [tmp_path / "ops"]) == "community"


def test_kind_core_counts_only_in_a_builtin_folder(tmp_path: Path) -> None:
    write_plugin(tmp_path / "ops", "house-rules", CLAIMS_CORE)
    write_plugin(tmp_path / "community", "pretender", CLAIMS_CORE, files=FUNCTION)
    packages = {p.id: p for p in scan([tmp_path / "ops", tmp_path / "community"], builtin_dirs=[tmp_path / "ops"])}
    builtin, pretender = packages["house-rules"], packages["pretender"]
    assert (builtin.source, builtin.kind, builtin.definition["kind"]) == ("builtin", "core", "core")
    assert (pretender.source, pretender.kind, pretender.definition["kind"]) == ("community", "plugin", "plugin")
    assert pretender.loaded, "loaded, as a plugin"
    [said] = [d for d in pretender.diagnostics if d.code == "core-not-builtin"]
    assert (said.severity, said.field_path) == ("warning", "kind")
    assert "loaded as a plugin" in said.message and not [d for d in builtin.diagnostics if d.code == "core-not-builtin"]
    # A new session gets the builtin core package, not the pretender; asked for, its code waits for approval.
    assert resolve_session_plugins(list(packages.values()), [], [], approved=[]).active == ["house-rules"]
    gated = resolve_confirmed_session_plugins(list(packages.values()), ["house-rules", "pretender"], approved=[])
    assert gated.runnable == ["house-rules"] and [(u.plugin_id, u.code) for u in gated.unavailable] == [("pretender", "approval-required")]


def test_an_install_never_lands_in_a_builtin_folder(tmp_path: Path) -> None:
    ops, community = tmp_path / "ops", tmp_path / "community"
    data = package_zip("pretender", CLAIMS_CORE, FUNCTION)
    with pytest.raises(InstallRefused, match="only builtin folders"):
        install_zip(data, (ops, community), builtin_dirs=[ops, community])
    outcome = install_zip(data, (ops, community), builtin_dirs=[ops])
    assert outcome.installed_dir == community / "pretender" and not (ops / "pretender").exists()


def test_an_install_that_cannot_write_its_folder_is_refused_clearly(tmp_path: Path) -> None:
    """Kubernetes delivers plugins in the image (read-only): InstallPackage says so, without the folder's path.
    (A folder under a file cannot be written even by root: the same OSError a read-only file system gives.)"""
    ops, blocker = tmp_path / "ops", tmp_path / "not-a-folder"
    blocker.write_text("")
    with pytest.raises(InstallRefused, match="add them to the image instead") as refused:
        install_zip(package_zip("pretender", CLAIMS_CORE, FUNCTION), (ops, blocker / "community"), builtin_dirs=[ops])
    assert str(tmp_path) not in str(refused.value)


async def test_install_package_of_a_zip_claiming_core_installs_a_community_plugin(registry_for, tmp_path: Path) -> None:
    community = tmp_path / "community"
    client = await registry_for([*default_plugin_dirs(), community])
    reply = await client.stub.InstallPackage(
        registry_pb2.InstallPackageRequest(zip=package_zip("pretender", CLAIMS_CORE, FUNCTION)), timeout=10)
    assert reply.ok, [d.message for d in reply.diagnostics]
    [said] = [d for d in reply.diagnostics if d.code == "core-not-builtin"]
    assert said.severity == common_pb2.SEVERITY_WARNING and said.field_path == "kind"
    plugin = (await client.stub.GetPlugin(registry_pb2.GetPluginRequest(plugin_id="pretender"), timeout=5)).plugin
    assert (plugin.source, plugin.kind, plugin.definition["kind"]) == ("community", "plugin", "plugin")
    resolved = await client.stub.ResolveSessionPlugins(registry_pb2.ResolveSessionPluginsRequest(approvals_known=True), timeout=5)
    assert "pretender" not in resolved.active and "pretender" not in resolved.session_plugins
    confirmed = await client.stub.ResolveConfirmedSessionPlugins(registry_pb2.ResolveConfirmedSessionPluginsRequest(
        active_plugins=["pretender"], approvals_known=True), timeout=5)
    assert list(confirmed.runnable) == [] and [u.code for u in confirmed.unavailable] == ["approval-required"]


async def test_a_registry_whose_folders_are_all_builtin_refuses_installs(registry_for, tmp_path: Path) -> None:
    ops = tmp_path / "ops"
    client = await registry_for([*default_plugin_dirs(), ops], builtin_dirs=[*default_plugin_dirs(), ops])
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await client.stub.InstallPackage(registry_pb2.InstallPackageRequest(zip=package_zip("pretender", CLAIMS_CORE, {})), timeout=10)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "no community plugin folder" in refused.value.details()
