"""A bounded PNG reader and writer for what a card needs: the image size (IHDR) and the `tEXt` chunks.

Every chunk's length is checked against what is left of the file and against TEXT_CHUNK_MAX before it is
sliced, its CRC is checked, and the chunk count is bounded; the pixels are never decoded. The writer puts
text chunks before IEND of a PNG it was given (a card's image) or of a 1x1 one it makes."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from services.registry.importing.limits import IMAGE_SIDE_MAX, PNG_CHUNKS_MAX, TEXT_CHUNK_MAX, refused

SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass
class PngText:
    width: int
    height: int
    # keyword (latin-1) -> text bytes, the first chunk of each keyword
    texts: dict[str, bytes] = field(default_factory=dict)


def is_png(data: bytes) -> bool:
    return data.startswith(SIGNATURE)


def read_png(data: bytes, where: str = "file") -> PngText:
    if not is_png(data):
        raise refused(where, "is not a PNG (no PNG signature)")
    offset, count, result = len(SIGNATURE), 0, None
    while True:
        if offset + 8 > len(data):
            raise refused(where, "ends inside a chunk header; the PNG is cut short")
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        count += 1
        if count > PNG_CHUNKS_MAX:
            raise refused(where, f"has more than {PNG_CHUNKS_MAX} chunks")
        name = kind.decode("latin-1")
        if length > len(data) - offset - 12:
            raise refused(f"{where}.{name}", f"says {length} bytes but the file has {len(data) - offset - 12} left")
        body = data[offset + 8:offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length:offset + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise refused(f"{where}.{name}", "has a wrong CRC; the PNG is damaged")
        offset += 12 + length
        if result is None:
            result = _header(name, body, where)
        elif name == "tEXt":
            _text(result, body, where)
        elif name == "IEND":
            return result


def _header(name: str, body: bytes, where: str) -> PngText:
    if name != "IHDR" or len(body) != 13:
        raise refused(f"{where}.IHDR", "must be the first chunk, 13 bytes long")
    width, height = struct.unpack(">II", body[:8])
    if not 0 < width <= IMAGE_SIDE_MAX or not 0 < height <= IMAGE_SIDE_MAX:
        raise refused(f"{where}.IHDR", f"is {width}x{height} pixels; an image is 1 to {IMAGE_SIDE_MAX} pixels a side")
    return PngText(width, height)


def _text(result: PngText, body: bytes, where: str) -> None:
    keyword, sep, text = body.partition(b"\0")
    if not sep or not 0 < len(keyword) < 80:
        raise refused(f"{where}.tEXt", "has no keyword (1 to 79 bytes then a zero byte)")
    if len(text) > TEXT_CHUNK_MAX:
        raise refused(f"{where}.tEXt.{keyword.decode('latin-1')}", f"holds {len(text)} bytes; at most {TEXT_CHUNK_MAX}")
    result.texts.setdefault(keyword.decode("latin-1"), text)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def blank_png() -> bytes:
    """A 1x1 opaque grey PNG, for a world that has no image."""
    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\x00\x80")
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", pixels) + _chunk(b"IEND", b"")


def with_texts(png: bytes, texts: dict[str, bytes], dropped: tuple[str, ...] = ()) -> bytes:
    """`png` (read and checked) with its `tEXt` chunks of these keywords (and of `dropped`) left out and `texts` put
    before IEND."""
    read_png(png, "image")
    leave_out = set(texts) | set(dropped)
    offset, kept = len(SIGNATURE), [SIGNATURE]
    while True:
        length, kind = struct.unpack(">I4s", png[offset:offset + 8])
        chunk = png[offset:offset + 12 + length]
        offset += 12 + length
        if kind == b"IEND":
            break
        if kind == b"tEXt" and chunk[8:8 + length].partition(b"\0")[0].decode("latin-1") in leave_out:
            continue
        kept.append(chunk)
    kept.extend(_chunk(b"tEXt", keyword.encode("latin-1") + b"\0" + text) for keyword, text in texts.items())
    kept.append(_chunk(b"IEND", b""))
    return b"".join(kept)
