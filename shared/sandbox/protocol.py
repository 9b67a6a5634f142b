"""The frames between a sandbox worker and its host, as types (msgspec Structs, JSON on the wire).

Every frame is one JSON object whose `k` names its kind; each direction has its own closed set of kinds, and
a frame is decoded against that set with validation: a worker's frame of an unknown kind, a missing field, a
field of the wrong type or a field no kind has is refused (ProtocolError naming the field), and the host
stops trusting that worker. The worker's `ready` frame says which PROTOCOL_VERSION it speaks; the host
refuses another. JSON (never pickle): the host decodes nothing but plain data from a worker.

An operation's arguments (`Call.a`) and its answer (`Reply.v`) stay raw JSON in the frame and are decoded
against the operation's own types (shared/sandbox/operations.py; the hooks service's in
services/hooks/common/worker_messages.py), so the frame is read once and each operation's fields are checked
where they are known.
"""

from __future__ import annotations

from typing import Any

import msgspec

# Bumped with any change to a frame or an operation's types; a worker built for another is refused at ready.
PROTOCOL_VERSION = 2

NULL = msgspec.Raw(b"null")


class ProtocolError(Exception):
    """A frame or an operation's message that is not what the protocol says (the field and why)."""


class _Frame(msgspec.Struct, tag_field="k", forbid_unknown_fields=True, omit_defaults=True):
    pass


# ----- host to worker


class Call(_Frame, tag="req"):
    """Run operation `op` with its arguments `a` (that operation's args type, as JSON)."""

    id: int
    op: str
    a: msgspec.Raw = NULL


class Answer(_Frame, tag="res"):
    """The host's answer to a worker's Ask: `v` on success, else the error `e` ({type, base, message, ...})."""

    id: int
    ok: bool
    v: Any = None
    e: dict[str, str | None] | None = None


class Stop(_Frame, tag="stop"):
    """The host gave up on call `id` (`why`: timeout or cancelled)."""

    id: int
    why: str


# ----- worker to host


class Ready(_Frame, tag="ready"):
    """A worker is up and isolated: the protocol it speaks, and what its isolation achieved."""

    version: int
    report: dict[str, Any]


class Reply(_Frame, tag="res"):
    """The answer to the host's Call `id`: `v` (the operation's reply type, as JSON) on success, else `e`."""

    id: int
    ok: bool
    v: msgspec.Raw = NULL
    e: dict[str, str | None] | None = None


class Ask(_Frame, tag="req"):
    """A ctx capability of call `of` (0: none) run by the host: `op(*a, **kw)`; `sandbox.http` is covel.http."""

    id: int
    of: int
    op: str
    a: list[Any] = []
    kw: dict[str, Any] = {}


class Note(_Frame, tag="note"):
    """A one-way message of call `of`, in order with its others (ctx.propose, ctx.emit_event, a batch's progress)."""

    of: int
    op: str
    a: list[Any] = []


class Log(_Frame, tag="log"):
    """A line of plugin output (covel.log, print) of call `of` (0: none): level, message, stream, fields."""

    of: int
    lv: str
    m: str
    s: str
    f: dict[str, Any] = {}


class Ack(_Frame, tag="ack"):
    """The worker's answer to a Stop: whether code of that call still runs in a thread."""

    id: int
    running: bool


class Retire(_Frame, tag="retire"):
    """The worker asks to be replaced (`why`: a limit it reached)."""

    why: str


HostFrame = Call | Answer | Stop
WorkerFrame = Ready | Reply | Ask | Note | Log | Ack | Retire

_encoder = msgspec.json.Encoder()
_host_frames = msgspec.json.Decoder(HostFrame)
_worker_frames = msgspec.json.Decoder(WorkerFrame)


def encode(value: Any) -> bytes:
    """JSON of a frame or an operation's message; TypeError/ValueError for what is not JSON data (NaN included)."""
    try:
        return _encoder.encode(value)
    except (msgspec.EncodeError, OverflowError) as error:
        raise ValueError(str(error)) from error


def decode_host_frame(body: bytes) -> HostFrame:
    """In a worker: a frame from its host."""
    try:
        return _host_frames.decode(body)
    except msgspec.DecodeError as error:
        raise ProtocolError(f"a frame from the host that is not the protocol's: {error}") from error


def decode_worker_frame(body: bytes) -> WorkerFrame:
    """In the host: a frame from a worker, checked field by field (the worker runs plugin code)."""
    try:
        return _worker_frames.decode(body)
    except msgspec.DecodeError as error:
        raise ProtocolError(f"a frame that is not the protocol's: {error}") from error


def decode_as(raw: msgspec.Raw | bytes, kind: Any, what: str) -> Any:
    """An operation's message (`what`: e.g. "the reply to hooks") as its type; ProtocolError naming the field."""
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.DecodeError as error:
        raise ProtocolError(f"{what} is not the protocol's: {error}") from error


def check_version(ready: Ready) -> None:
    if ready.version != PROTOCOL_VERSION:
        raise ProtocolError(f"the worker speaks protocol version {ready.version}, this host {PROTOCOL_VERSION}: "
                            "the worker's code is not the service's (a stale install or a mixed deployment)")
