"""The byte stream between a sandbox worker and its host, and between the pool and its zygote: frames of a 4-byte
big-endian length, then one JSON object. Frames past MAX_FRAME_BYTES end the channel.

A worker's frames are typed (shared/sandbox/protocol.py: `frame` and `read_body` carry them, the protocol decodes
them with validation); the zygote's few control messages are plain JSON objects (`encode`, `read_frame`). JSON
(not pickle) on purpose: the host never decodes anything but plain data from a worker, whose plugin code may
write whatever it likes to the channel.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

MAX_FRAME_BYTES = 64 * 1024 * 1024
_LENGTH = struct.Struct(">I")


class ChannelClosed(Exception):
    """The other side is gone, or sent something that is not a frame."""


def frame(body: bytes) -> bytes:
    """`body` (one JSON object) as a frame; ValueError when it is larger than the channel takes."""
    if len(body) > MAX_FRAME_BYTES:
        raise ValueError(f"a message of {len(body)} bytes is larger than the channel's {MAX_FRAME_BYTES}")
    return _LENGTH.pack(len(body)) + body


def encode(message: dict[str, Any]) -> bytes:
    """A frame of a plain JSON object; TypeError/ValueError when `message` holds something that is not JSON data."""
    return frame(json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode())


async def read_body(reader: asyncio.StreamReader) -> bytes:
    """The next frame's body (its JSON, not decoded yet)."""
    try:
        header = await reader.readexactly(_LENGTH.size)
        (length,) = _LENGTH.unpack(header)
        if length > MAX_FRAME_BYTES:
            raise ChannelClosed(f"a frame of {length} bytes is larger than the channel's {MAX_FRAME_BYTES}")
        return await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError) as error:
        raise ChannelClosed("the channel closed") from error


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    """The next frame as a plain JSON object (the zygote's messages)."""
    body = await read_body(reader)
    try:
        message = json.loads(body, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as error:
        raise ChannelClosed(f"a frame that is not JSON: {error}") from error
    if not isinstance(message, dict):
        raise ChannelClosed("a frame that is not a JSON object")
    return message
