"""Generated zip archives through a real registry server's ValidatePackage and InstallPackage: valid
packages with members added, renamed or spoilt (`..`, absolute and odd names, symlinks and other
file types, duplicates, sizes that lie, unreadable compression), cut short, or random bytes. Each
gets a reply with diagnostics or a clear status, in bounded time, and nothing lands outside the
community folder; a refused install writes nothing at all."""

from __future__ import annotations

import io
import re
import stat
import struct
import time
import warnings
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest_asyncio
from hypothesis import given
from hypothesis import strategies as st

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2
from shared.errors import MESSAGE_MAX_CHARS
from shared.settings import REPO_ROOT
from tests.fuzz.profiles import fuzzed
from tests.registry.conftest import RegistryClient, started_registry

SEEDS = {
    "journal": REPO_ROOT / "tests" / "registry" / "fixtures" / "good" / "journal",
    "dice-check": REPO_ROOT / "plugins" / "dice-check",
}
# The registry's own limit is 10 s of unpacking (services/registry/zip_install.py), then the checks.
ANSWER_LIMIT_S = 30.0
CLEAR_REFUSALS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION}
HOSTILE_NAMES = [
    "{top}/../../escaped.py", "../escaped.py", "/etc/escaped", "C:/escaped", "{top}\\..\\escaped", "{top}/a\x00b", "{top}/./x.txt",
    "{top}//x.txt", "./{top}/x.txt", "{top}/PLUGIN.md", "{top}/runtimes/", "{top}/" + "d/" * 150 + "deep.txt", "{top}/" + "n" * 300,
    "{top}/日本語.md", "{top}/\u202ecod.exe", "{top}/con:aux", "other/PLUGIN.md", "PLUGIN.md", "__MACOSX/{top}/._PLUGIN.md",
    "{top}/PLUGIN.md/inner", "{TOP}/PLUGIN.md", "{top}/server/index.py",
]
FILE_TYPES = [0, stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK, stat.S_IFIFO, stat.S_IFCHR, stat.S_IFSOCK]


def zipped(folder: Path, top: str) -> dict[str, bytes]:
    return {
        (f"{top}/" if top else "") + path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


@dataclass
class Member:
    name: str
    data: bytes
    file_type: int = stat.S_IFREG
    mode: int = 0o644
    compression: int = zipfile.ZIP_DEFLATED
    flag_bits: int = 0
    declared_size: int | None = None


def _write(members: list[Member]) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w") as archive:
        warnings.simplefilter("ignore")  # duplicate names are meant
        for member in members:
            info = zipfile.ZipInfo(member.name)
            info.external_attr = (member.file_type | member.mode) << 16
            info.compress_type = member.compression
            archive.writestr(info, member.data)
            # writestr rewrites flag bits and sizes; these are patched in the bytes below.
    data = bytearray(buffer.getvalue())
    for member in members:
        if member.flag_bits or member.declared_size is not None:
            _patch_headers(data, member)
    return bytes(data)


def _patch_headers(data: bytearray, member: Member) -> None:
    """The member's flag bits and uncompressed size as `member` says, in its local and central headers."""
    encoded = member.name.encode("utf-8")
    for signature, flags_at, size_at, name_at in ((b"PK\x03\x04", 6, 22, 30), (b"PK\x01\x02", 8, 24, 46)):
        at = data.find(signature)
        while at != -1:
            if data[at + name_at : at + name_at + len(encoded)] == encoded:
                if member.flag_bits:
                    data[at + flags_at : at + flags_at + 2] = struct.pack("<H", member.flag_bits)
                if member.declared_size is not None:
                    data[at + size_at : at + size_at + 4] = struct.pack("<I", member.declared_size)
            at = data.find(signature, at + 1)


@st.composite
def hostile_member(draw: st.DrawFn, top: str) -> Member:
    name = draw(st.one_of(st.sampled_from(HOSTILE_NAMES), st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30)))
    name = name.replace("{top}", top or "pkg").replace("{TOP}", (top or "pkg").upper())
    data = draw(st.one_of(st.binary(max_size=64), st.sampled_from([b"---\nid: x\n---\n", b"/etc/passwd", b"\x00" * 2_000_000])))
    return Member(
        name=name,
        data=data,
        file_type=draw(st.sampled_from(FILE_TYPES)),
        mode=draw(st.sampled_from([0o644, 0o755, 0o4777, 0o000])),
        compression=draw(st.sampled_from([zipfile.ZIP_DEFLATED, zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])),
        flag_bits=draw(st.sampled_from([0, 0, 0x1, 0x8, 0x800])),
        declared_size=draw(st.sampled_from([None, None, 0, 1, 2**32 - 1, 9 * 1024 * 1024])),
    )


@st.composite
def archives(draw: st.DrawFn) -> tuple[bytes, str]:
    """(zip bytes, the plugin_id to send with them)."""
    seed = draw(st.sampled_from(sorted(SEEDS)))
    top = draw(st.sampled_from([seed, "", "renamed"]))
    members = [Member(name, data) for name, data in zipped(SEEDS[seed], top).items()]
    for _ in range(draw(st.integers(0, 3))):
        members.insert(draw(st.integers(0, len(members))), draw(hostile_member(top)))
    if members and draw(st.booleans()):
        index = draw(st.integers(0, len(members) - 1))
        members[index] = draw(hostile_member(top)) if draw(st.booleans()) else Member(members[index].name, draw(st.binary(max_size=200)))
    data = _write(members)
    shape = draw(st.sampled_from(["whole", "whole", "whole", "cut", "random", "prefixed"]))
    if shape == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif shape == "random":
        data = draw(st.binary(max_size=300))
    elif shape == "prefixed":
        data = draw(st.binary(min_size=1, max_size=50)) + data
    plugin_id = draw(st.sampled_from(["", "", seed, "renamed", "../x", "Bad Id", "x" * 300]))
    return data, plugin_id


@dataclass
class ZipTarget:
    client: RegistryClient
    community: Path
    outside: Path


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def zip_target(tmp_path_factory) -> AsyncIterator[ZipTarget]:
    root = tmp_path_factory.mktemp("fuzz-zips")
    community, outside = root / "community", root / "outside"
    community.mkdir()
    outside.mkdir()
    running, client = await started_registry([community], builtin_dirs=[REPO_ROOT / "plugins"])
    try:
        yield ZipTarget(client, community, outside)
    finally:
        await client.close()
        await running.stop(0)  # type: ignore[attr-defined]


def tree(folder: Path) -> dict[str, int]:
    return {path.relative_to(folder).as_posix(): path.lstat().st_mode for path in sorted(folder.rglob("*"))}


def assert_clear_refusal(error: grpc.aio.AioRpcError, target: ZipTarget) -> None:
    details = error.details() or ""
    assert error.code() in CLEAR_REFUSALS, f"{error.code().name}: {details}"
    assert len(details) <= MESSAGE_MAX_CHARS
    for folder in (target.community, target.outside.parent):
        assert str(folder) not in details, f"the message names a host folder: {details}"


def assert_diagnosed(reply: registry_pb2.ValidatePackageResponse | registry_pb2.InstallPackageResponse) -> None:
    errors = [d for d in reply.diagnostics if d.severity == common_pb2.SEVERITY_ERROR]
    assert reply.ok == (not errors), [(d.code, d.message) for d in reply.diagnostics]
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", d.code) for d in reply.diagnostics), [d.code for d in reply.diagnostics]


@fuzzed(short=12, long=1500)
@given(archive=archives(), install=st.booleans(), replace=st.booleans())
async def test_generated_zips_get_diagnostics_or_a_clear_status(zip_target: ZipTarget, archive: tuple[bytes, str], install: bool, replace: bool) -> None:
    data, plugin_id = archive
    before = tree(zip_target.community)
    started = time.monotonic()
    try:
        if install:
            reply = await zip_target.client.stub.InstallPackage(
                registry_pb2.InstallPackageRequest(zip=data, plugin_id=plugin_id, replace=replace), timeout=ANSWER_LIMIT_S)
        else:
            reply = await zip_target.client.stub.ValidatePackage(
                registry_pb2.ValidatePackageRequest(zip=data, plugin_id=plugin_id), timeout=ANSWER_LIMIT_S)
    except grpc.aio.AioRpcError as error:
        assert_clear_refusal(error, zip_target)
        reply = None
    assert time.monotonic() - started < ANSWER_LIMIT_S
    if reply is not None:
        assert_diagnosed(reply)
    after = tree(zip_target.community)
    assert not any(stat.S_ISLNK(mode) for mode in after.values()), "an install wrote a symbolic link"
    assert tree(zip_target.outside) == {} and {p.name for p in zip_target.outside.parent.iterdir()} == {"community", "outside"}
    if not (install and reply is not None and reply.ok):
        assert after == before, "a refused install or a validation changed the community folder"
