"""CHARX (Character Card V3): a zip with `card.json` at its root and the assets the card's `embeded://` URIs
name. Read with zip rules: a bounded member count, no absolute or `..` paths, no links, each member's and the
whole's uncompressed size bounded while it is read (a declared size can lie), and a compression ratio a
decompression bomb cannot pass."""

from __future__ import annotations

import io
import stat
import zipfile
import zlib
from pathlib import PurePosixPath

from services.registry.importing.limits import ZIP_MEMBER_MAX, ZIP_MEMBERS_MAX, ZIP_RATIO_MAX, ZIP_TOTAL_MAX, refused

CARD_FILE = "card.json"
READ_STEP = 64 * 1024


def is_zip(data: bytes) -> bool:
    return data.startswith(b"PK\x03\x04")


def read_charx(data: bytes) -> dict[str, bytes]:
    """Every file member of the CHARX by its path; refuses what breaks a zip rule."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as error:
        raise refused("file", f"is not a readable zip ({error})") from None
    members = archive.infolist()
    if len(members) > ZIP_MEMBERS_MAX:
        raise refused("file", f"holds {len(members)} members; a CHARX holds at most {ZIP_MEMBERS_MAX}")
    files: dict[str, bytes] = {}
    total = 0
    for info in members:
        name = _checked_name(info)
        if info.is_dir():
            continue
        body = _read_member(archive, info, name, ZIP_TOTAL_MAX - total)
        total += len(body)
        files[name] = body
    if CARD_FILE not in files:
        raise refused(CARD_FILE, "is missing: a CHARX has card.json at its root")
    return files


def _checked_name(info: zipfile.ZipInfo) -> str:
    name = info.filename
    path = PurePosixPath(name)
    if not path.parts or name.startswith("/") or "\\" in name or ".." in path.parts or ":" in path.parts[0]:
        raise refused(f"file:{name[:200]}", "is not a relative path inside the zip")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise refused(f"file:{name[:200]}", "is a symbolic link; a CHARX holds plain files")
    if info.flag_bits & 0x1:
        raise refused(f"file:{name[:200]}", "is encrypted")
    return name.rstrip("/") if info.is_dir() else name


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, left: int) -> bytes:
    limit = min(ZIP_MEMBER_MAX, left)
    if info.file_size > limit:
        raise refused(f"file:{name}", f"is {info.file_size} bytes uncompressed; at most {limit}")
    allowed = min(limit, max(info.compress_size, 1) * ZIP_RATIO_MAX)
    parts, size = [], 0
    try:
        with archive.open(info) as member:
            while chunk := member.read(READ_STEP):
                size += len(chunk)
                if size > allowed:
                    raise refused(f"file:{name}", f"decompresses past {allowed} bytes (a ratio over {ZIP_RATIO_MAX} or a size over "
                                                  f"{limit}): refused as a decompression bomb")
                parts.append(chunk)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, ValueError, zlib.error) as error:
        raise refused(f"file:{name}", f"cannot be read ({error})") from None
    return b"".join(parts)


def write_charx(card_json: bytes, assets: dict[str, bytes]) -> bytes:
    """A CHARX of card.json and the assets by path (assets/<type>/...)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(CARD_FILE, card_json)
        for path, body in sorted(assets.items()):
            archive.writestr(path, body)
    return out.getvalue()
