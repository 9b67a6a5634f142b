"""Frames between a sandbox worker and its host: a 4-byte big-endian length, then one JSON object.

JSON (not pickle) on purpose: the host never decodes anything but plain data from a worker, whose
plugin code may write whatever it likes to the channel. Frames past MAX_FRAME_BYTES end the channel.

Kinds (`k`): `req` {id, op, a} a call (either way: host to worker for plugin code, worker to host
for a ctx capability, with `of` the host call it belongs to); `res` {id, ok, v | e} its answer;
`note` {of, op, a} a one-way message of a call (ctx.propose, ctx.emit_event); `log` {of, lv, m, s, f}
a line of plugin output (shared/sandbox/worker_output.py); a worker's `req` whose op is `sandbox.http`
is a covel.http request the host checks and sends (`of` 0: outside any call); `stop` {id, why}
the host gave up on a call; `ack` {id, running} the worker's answer to it; `ready` {report};
`retire` {why} a worker that asks to be replaced.
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


def encode(message: dict[str, Any]) -> bytes:
    """A frame; TypeError/ValueError when `message` holds something that is not JSON data."""
    body = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    if len(body) > MAX_FRAME_BYTES:
        raise ValueError(f"a message of {len(body)} bytes is larger than the channel's {MAX_FRAME_BYTES}")
    return _LENGTH.pack(len(body)) + body


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    try:
        header = await reader.readexactly(_LENGTH.size)
        (length,) = _LENGTH.unpack(header)
        if length > MAX_FRAME_BYTES:
            raise ChannelClosed(f"a frame of {length} bytes is larger than the channel's {MAX_FRAME_BYTES}")
        body = await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError) as error:
        raise ChannelClosed("the channel closed") from error
    try:
        message = json.loads(body, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as error:
        raise ChannelClosed(f"a frame that is not JSON: {error}") from error
    if not isinstance(message, dict):
        raise ChannelClosed("a frame that is not a JSON object")
    return message
