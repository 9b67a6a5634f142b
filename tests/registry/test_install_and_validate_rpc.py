"""ValidatePackage, InstallPackage and ResolveConfirmedSessionPlugins over a real gRPC channel."""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path

import grpc
import pytest

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2
from services.registry.zip_install import MAX_MEMBER_BYTES, unpack
from shared.settings import default_plugin_dirs
from tests.registry.conftest import FIXTURES
from tests.support.builtin_plugins import core_plugin_ids

JOURNAL = FIXTURES / "good" / "journal"


def zip_folder(folder: Path, prefix: str | None = None, extra: dict[str, bytes] | None = None) -> bytes:
    buffer = io.BytesIO()
    top = folder.name if prefix is None else prefix
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                relative = path.relative_to(folder).as_posix()
                archive.write(path, f"{top}/{relative}" if top else relative)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return buffer.getvalue()


def with_member(base: bytes, info: zipfile.ZipInfo, data: bytes = b"x") -> bytes:
    buffer = io.BytesIO(base)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr(info, data)
    return buffer.getvalue()


def symlink_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


UNSAFE = [
    ("zip-slip", lambda base: with_member(base, zipfile.ZipInfo("journal/../../evil.py")), "zip-path-traversal"),
    ("absolute", lambda base: with_member(base, zipfile.ZipInfo("/etc/evil")), "zip-absolute-path"),
    ("drive", lambda base: with_member(base, zipfile.ZipInfo("C:/evil")), "zip-absolute-path"),
    ("backslash", lambda base: with_member(base, zipfile.ZipInfo("journal\\..\\evil")), "zip-unsafe-path"),
    ("symlink", lambda base: with_member(base, symlink_info("journal/lib/passwd"), b"/etc/passwd"), "zip-symlink"),
    ("oversize", lambda base: with_member(base, zipfile.ZipInfo("journal/big.bin"), b"0" * (MAX_MEMBER_BYTES + 1)), "zip-too-large"),
    ("not-a-zip", lambda base: b"PK\x03\x04 definitely not", "zip-invalid"),
    ("two-packages", lambda base: with_member(base, zipfile.ZipInfo("other/PLUGIN.md"), b"---\n---\n"), "zip-layout"),
]


@pytest.mark.parametrize(("name", "make", "code"), UNSAFE, ids=[row[0] for row in UNSAFE])
def test_unsafe_archives_are_rejected_before_writing(name: str, make, code: str, tmp_path: Path) -> None:
    with unpack(make(zip_folder(JOURNAL))) as unpacked:
        assert unpacked.root is None
        assert code in [d.code for d in unpacked.diagnostics], [str(d) for d in unpacked.diagnostics]
    assert not (tmp_path.parent / "evil.py").exists()


async def test_validate_package_by_path_and_by_zip(registry_for) -> None:
    # A path is validated only inside the registry's plugin folders: the fixtures' folder is one here.
    client = await registry_for([*default_plugin_dirs(), FIXTURES / "good"])
    reply = await client.stub.ValidatePackage(registry_pb2.ValidatePackageRequest(path=str(JOURNAL)), timeout=5)
    assert reply.ok and reply.plugin_id == "journal" and list(reply.diagnostics) == []
    broken = FIXTURES / "missing-stage" / "missing-stage"
    reply = await client.stub.ValidatePackage(registry_pb2.ValidatePackageRequest(zip=zip_folder(broken)), timeout=5)
    # Strict: a runtime that would only be dropped at load is an error here.
    assert not reply.ok and reply.plugin_id == "missing-stage"
    [diagnostic] = reply.diagnostics
    assert (diagnostic.code, diagnostic.field_path, diagnostic.severity) == (
        "stage-missing",
        "runtime.schedule.stage",
        common_pb2.SEVERITY_ERROR,
    )
    rooted = zip_folder(JOURNAL, prefix="")
    reply = await client.stub.ValidatePackage(registry_pb2.ValidatePackageRequest(zip=rooted, plugin_id="journal"), timeout=5)
    assert reply.ok
    reply = await client.stub.ValidatePackage(registry_pb2.ValidatePackageRequest(zip=rooted), timeout=5)
    assert not reply.ok and reply.diagnostics[0].code == "zip-layout"
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.stub.ValidatePackage(registry_pb2.ValidatePackageRequest(path="/no/such/package"), timeout=5)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.stub.ValidatePackage(registry_pb2.ValidatePackageRequest(), timeout=5)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_install_writes_the_package_and_bumps_the_generation(registry_for, tmp_path: Path) -> None:
    community = tmp_path / "community"
    client = await registry_for([*default_plugin_dirs(), community])
    before = (await client.stub.ListPlugins(registry_pb2.ListPluginsRequest(), timeout=5)).generation
    reply = await client.stub.InstallPackage(registry_pb2.InstallPackageRequest(zip=zip_folder(JOURNAL)), timeout=10)
    assert reply.ok, [d.message for d in reply.diagnostics]
    assert reply.generation == before + 1
    assert Path(reply.installed_dir) == community / "journal" and (community / "journal" / "PLUGIN.md").is_file()
    listed = await client.stub.GetPlugin(registry_pb2.GetPluginRequest(plugin_id="journal"), timeout=5)
    assert listed.plugin.source == "community" and listed.plugin.state == registry_pb2.PLUGIN_STATE_LOADED
    assert list(listed.plugin.tools) == ["summarize"] and list(listed.plugin.event_topics) == ["journal.written"]
    # Installing the same id again needs replace.
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.stub.InstallPackage(registry_pb2.InstallPackageRequest(zip=zip_folder(JOURNAL)), timeout=10)
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    again = await client.stub.InstallPackage(registry_pb2.InstallPackageRequest(zip=zip_folder(JOURNAL), replace=True), timeout=10)
    assert again.ok and again.generation == before + 2
    # A builtin id is never replaced.
    narrator = default_plugin_dirs()[0] / "narrator"
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.stub.InstallPackage(registry_pb2.InstallPackageRequest(zip=zip_folder(narrator), replace=True), timeout=10)
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_install_refuses_broken_and_unsafe_packages_and_writes_nothing(registry_for, tmp_path: Path) -> None:
    community = tmp_path / "community"
    client = await registry_for([*default_plugin_dirs(), community])
    generation = (await client.stub.ListPlugins(registry_pb2.ListPluginsRequest(), timeout=5)).generation
    broken = zip_folder(FIXTURES / "missing-runtime-md" / "missing-md")
    reply = await client.stub.InstallPackage(registry_pb2.InstallPackageRequest(zip=broken), timeout=10)
    assert not reply.ok and reply.generation == generation
    assert [(d.code, d.file) for d in reply.diagnostics if d.severity == common_pb2.SEVERITY_ERROR] == [
        ("runtime-manifest-missing", "runtimes/notes")
    ]
    slip = with_member(zip_folder(JOURNAL), zipfile.ZipInfo("journal/../../../evil.py"))
    reply = await client.stub.InstallPackage(registry_pb2.InstallPackageRequest(zip=slip), timeout=10)
    assert not reply.ok and reply.diagnostics[0].code == "zip-path-traversal"
    assert not community.exists() or list(community.iterdir()) == []
    assert not (tmp_path / "evil.py").exists()


async def test_install_needs_a_community_folder(registry_for) -> None:
    client = await registry_for(default_plugin_dirs())
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.stub.InstallPackage(registry_pb2.InstallPackageRequest(zip=zip_folder(JOURNAL)), timeout=10)
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_resolve_rpcs_carry_approvals_world_requirements_and_confirmed_sets(registry_for) -> None:
    client = await registry_for(default_plugin_dirs())
    reply = await client.stub.ResolveSessionPlugins(
        registry_pb2.ResolveSessionPluginsRequest(required_contracts=["narrative-engine@2", "memory@1"], approvals_known=True),
        timeout=5,
    )
    # Every kind: core builtin joins (world-time, memory, history-compaction besides the narrator).
    assert sorted(reply.active) == sorted(core_plugin_ids())
    [unmet] = reply.unmet
    assert (unmet.contract, unmet.code) == ("memory@1", "missing-provider")
    confirmed = await client.stub.ResolveConfirmedSessionPlugins(
        registry_pb2.ResolveConfirmedSessionPluginsRequest(active_plugins=["narrator", "ghost"]), timeout=5
    )
    assert list(confirmed.runnable) == ["narrator"]
    assert [(item.plugin_id, item.code) for item in confirmed.unavailable] == [("ghost", "not-found")]
