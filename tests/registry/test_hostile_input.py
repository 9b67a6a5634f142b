"""Hostile packages and requests (issue 18 item 5), through a real registry server: each is refused
with a diagnostic or INVALID_ARGUMENT, quickly and in little memory, and the registry carries on."""

from __future__ import annotations

import io
import struct
import tempfile
import time
import tracemalloc
import zipfile
from pathlib import Path

import grpc
import pytest

from covel.registry.v1 import registry_pb2
from tests.registry.conftest import FIXTURES, write_plugin

JOURNAL = FIXTURES / "good" / "journal"
ANCHOR_LOOP = "id: looped\nkind: plugin\nlist: &loop [*loop]"
# Nine levels of ten aliases: 10^9 strings once expanded, about 1 KB written.
BILLION_LAUGHS = "id: laughs\nkind: plugin\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 10)}]\n" for level in range(1, 10)
)


def diagnostics_of(reply, plugin_id: str) -> list[tuple[str, str]]:
    [plugin] = [plugin for plugin in reply.plugins if plugin.id == plugin_id]
    return [(d.code, d.message) for d in plugin.diagnostics]


async def test_an_anchor_loop_or_billion_laughs_in_a_plugin_folder_fails_that_package_only(registry_for, tmp_path: Path) -> None:
    write_plugin(tmp_path, "looped", ANCHOR_LOOP)
    write_plugin(tmp_path, "laughs", BILLION_LAUGHS)
    write_plugin(tmp_path, "localised", "id: localised\nkind: plugin", files={"locales/zh.yaml": "a: &a {b: *a}\n"})
    write_plugin(tmp_path, "plain", "id: plain\nkind: plugin")
    started = time.monotonic()
    client = await registry_for([tmp_path])  # the registry starts: before, the loop ended the process
    reply = await client.stub.ListPlugins(registry_pb2.ListPluginsRequest(), timeout=10)
    assert time.monotonic() - started < 10
    states = {plugin.id: plugin.state for plugin in reply.plugins}
    assert states["plain"] == registry_pb2.PLUGIN_STATE_LOADED
    assert states["looped"] == states["laughs"] == states["localised"] == registry_pb2.PLUGIN_STATE_FAILED
    [(code, message)] = diagnostics_of(reply, "looped")
    assert code == "frontmatter-yaml" and "loop" in message
    [(code, message)] = diagnostics_of(reply, "laughs")
    assert code == "frontmatter-yaml" and "expands to more than" in message
    [(code, message)] = diagnostics_of(reply, "localised")
    assert code == "locale-yaml" and "loop" in message


def zip_of(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def lying_about_sizes(data: bytes, name: str, declared: int) -> bytes:
    """The zip with `name`'s uncompressed size written as `declared` in its local and central headers."""
    patched = bytearray(data)
    encoded = name.encode()
    for signature, size_at, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        at = patched.find(signature)
        while at != -1:
            if patched[at + name_at : at + name_at + len(encoded)] == encoded:
                patched[at + size_at : at + size_at + 4] = struct.pack("<I", declared)
            at = patched.find(signature, at + 1)
    return bytes(patched)


async def validate_measured(client, **request) -> tuple[registry_pb2.ValidatePackageResponse, float, int]:
    tracemalloc.start()
    started = time.monotonic()
    try:
        reply = await client.stub.ValidatePackage(registry_pb2.ValidatePackageRequest(**request), timeout=30)
        return reply, time.monotonic() - started, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def test_a_tiny_zip_bomb_is_refused_in_little_time_and_memory(registry_for) -> None:
    client = await registry_for([])
    # A billion laughs manifest, zipped: a few hundred bytes.
    laughs = zip_of({"laughs/PLUGIN.md": f"---\n{BILLION_LAUGHS}---\n".encode()})
    assert len(laughs) < 600
    reply, seconds, peak = await validate_measured(client, zip=laughs)
    assert not reply.ok and [d.code for d in reply.diagnostics] == ["frontmatter-yaml"]
    assert seconds < 5 and peak < 50 * 1024 * 1024, (seconds, peak)
    # bzip2 inflates without an output bound in zipfile: 100 MB of zeros in a few hundred bytes,
    # declared as 10 bytes, is never read.
    bomb = zip_of({"bomb/PLUGIN.md": b"---\nid: bomb\n---\n", "bomb/zeros.bin": bytes(100 * 1024 * 1024)}, zipfile.ZIP_BZIP2)
    bomb = lying_about_sizes(bomb, "bomb/zeros.bin", 10)
    assert len(bomb) < 1000
    reply, seconds, peak = await validate_measured(client, zip=bomb)
    assert not reply.ok and {d.code for d in reply.diagnostics} == {"zip-compression"}
    assert "deflate" in reply.diagnostics[0].message
    assert seconds < 5 and peak < 50 * 1024 * 1024, (seconds, peak)
    # The same with deflate: reading stops at the declared size (and the CRC then fails).
    deflated = zip_of({"bomb/PLUGIN.md": b"---\nid: bomb\n---\n", "bomb/zeros.bin": bytes(100 * 1024 * 1024)})
    reply, seconds, peak = await validate_measured(client, zip=lying_about_sizes(deflated, "bomb/zeros.bin", 10))
    assert not reply.ok and [d.code for d in reply.diagnostics] == ["zip-invalid"] and "CRC" in reply.diagnostics[0].message
    assert seconds < 5 and peak < 50 * 1024 * 1024, (seconds, peak)


@pytest.mark.parametrize("kind", ["missing", "existing-folder", "symlink-out", "relative", "the-folder-itself"])
async def test_validate_by_path_stays_inside_the_plugin_folders(registry_for, tmp_path: Path, kind: str) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    outside = tmp_path / "elsewhere" / "journal"
    outside.mkdir(parents=True)
    (outside / "PLUGIN.md").write_text((JOURNAL / "PLUGIN.md").read_text(encoding="utf-8"), encoding="utf-8")
    (plugins / "link").symlink_to(outside)
    path = {
        "missing": "/no/such/package",
        "existing-folder": str(outside),
        "symlink-out": str(plugins / "link"),
        "relative": "plugins/journal",
        "the-folder-itself": str(plugins),
    }[kind]
    client = await registry_for([plugins])
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.stub.ValidatePackage(registry_pb2.ValidatePackageRequest(path=path), timeout=10)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # The same answer whether the folder exists or not: nothing is learnt about the host.
    assert raised.value.details() == (
        "path: is not inside one of the registry's plugin folders (COVEL_PLUGIN_DIRS); send the package as `zip` instead"
    )


async def test_huge_ids_are_refused_and_never_echoed_in_full(registry_for) -> None:
    client = await registry_for([])
    huge = "x" * 1_000_000
    for call in (
        client.stub.GetPlugin(registry_pb2.GetPluginRequest(plugin_id=huge), timeout=10),
        client.stub.GetPlugins(registry_pb2.GetPluginsRequest(plugin_ids=["journal", huge]), timeout=10),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "ids are at most 256" in raised.value.details() and len(raised.value.details()) < 300
    # A long but allowed id that is not found: the message cuts it and names no host folder.
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.stub.GetPlugin(registry_pb2.GetPluginRequest(plugin_id="y" * 250), timeout=10)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert "y" * 250 not in raised.value.details() and "…(252 characters)" in raised.value.details()  # with its backticks
    assert "searched" not in raised.value.details() and "/" not in raised.value.details()


async def test_a_package_whose_load_fails_outright_is_left_out_and_the_registry_goes_on(registry_for, tmp_path: Path, monkeypatch) -> None:
    # An input no limit foresaw (here: the loader running out of memory on one folder) fails that package alone.
    from services.registry import package_guard

    real_load = package_guard.load_package

    def load(root: Path, **options):
        if root.name == "exhausting":
            raise MemoryError
        return real_load(root, **options)

    monkeypatch.setattr(package_guard, "load_package", load)
    write_plugin(tmp_path, "exhausting", "id: exhausting\nkind: plugin")
    write_plugin(tmp_path, "plain", "id: plain\nkind: plugin")
    client = await registry_for([tmp_path])
    reply = await client.stub.ListPlugins(registry_pb2.ListPluginsRequest(), timeout=10)
    states = {plugin.id: plugin.state for plugin in reply.plugins}
    assert states == {"exhausting": registry_pb2.PLUGIN_STATE_FAILED, "plain": registry_pb2.PLUGIN_STATE_LOADED}
    [(code, message)] = diagnostics_of(reply, "exhausting")
    assert code == "package-unloadable" and "MemoryError" in message


async def test_a_member_that_cannot_be_unpacked_is_named_without_the_registrys_folder(registry_for) -> None:
    client = await registry_for([])
    long_name = "long/" + "n" * 300 + ".md"
    reply, _, _ = await validate_measured(client, zip=zip_of({"long/PLUGIN.md": b"---\nid: long\n---\n", long_name: b"x"}))
    # Refused from the zip's directory, before anything is written (it was the file system's error, naming the folder).
    [problem] = [d for d in reply.diagnostics if d.code == "zip-path-too-long"]
    assert "at most 255 bytes" in problem.message and "/tmp" not in problem.message, problem.message


@pytest.mark.parametrize("member", ["long/" + "d" * 300 + "/x.md", "long/" + "f" * 300, "long/" + "/".join(["a" * 200] * 6) + "/x"])
async def test_a_member_path_too_long_for_a_file_system_is_a_diagnostic_and_leaves_nothing(registry_for, tmp_path: Path,
                                                                                        monkeypatch, member: str) -> None:
    # The registry (in this process) unpacks into the temporary folder: a private one shows what a refused zip leaves.
    unpack_dir = tmp_path / "tmp"
    unpack_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(unpack_dir))
    community = tmp_path / "community"
    community.mkdir()
    client = await registry_for([community])
    data = zip_of({"long/PLUGIN.md": b"---\nid: long\nkind: plugin\n---\n", member: b"x"})
    for call in (client.stub.ValidatePackage(registry_pb2.ValidatePackageRequest(zip=data), timeout=30),
                 client.stub.InstallPackage(registry_pb2.InstallPackageRequest(zip=data), timeout=30)):
        try:
            reply = await call
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
            assert "zip-path-too-long" in error.details(), error.details()
        else:
            assert not reply.ok and [d.code for d in reply.diagnostics] == ["zip-path-too-long"], reply
    assert not list(unpack_dir.iterdir()), "a refused zip leaves no unpack folder"
    assert not list(community.iterdir()), "nothing was installed"
