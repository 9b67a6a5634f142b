"""The typed, versioned worker protocol (shared/sandbox/protocol.py): what a worker sends is decoded against its
kinds with validation. Plugin code that writes its own frames into the channel (a wrong-typed field, an unknown
kind, a reply that is not its operation's type) gets its worker stopped with a fault naming the field; a worker
of another protocol version is refused at start."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from services.hooks.common.worker_messages import HookOutcome
from services.hooks.sandboxed_entries import WORKER_OPERATIONS
from shared.sandbox import SandboxPool, SandboxSettings, WorkerGone, protocol
from shared.sandbox.operations import register_operations
from shared.sandbox.protocol import Ask, Log, ProtocolError, Reply, decode_worker_frame, encode

SESSION_LOOP = pytest.mark.asyncio(loop_scope="session")

ENTRY = '''
import gc, struct

def register(covel):
    covel.on("TurnStart", forge, timeout_ms=5000)

def _server():
    return next(o for o in gc.get_objects() if type(o).__name__ == "WorkerServer")

async def forge(ctx, payload):
    server = _server()
    body = payload["frame"].replace("CALL", str(max(server._calls))).encode()
    server._writer.write(struct.pack(">I", len(body)) + body)
    return {"forged": True}
'''
VIEW = {"event": "TurnStart", "session_id": "s", "turn_id": "t", "locale": "en", "active_plugin_ids": ["forger"]}


@pytest.fixture(autouse=True)
def hooks_operations() -> None:
    register_operations(WORKER_OPERATIONS)


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    root = tmp_path / "forger"
    (root / "server").mkdir(parents=True)
    (root / "server" / "index.py").write_text(ENTRY)
    for path in (tmp_path, root, root / "server", root / "server" / "index.py"):
        path.chmod(0o755)
    return root


def test_a_frame_is_decoded_against_its_kind() -> None:
    assert decode_worker_frame(encode(Log(3, "info", "hi", "log"))) == Log(3, "info", "hi", "log", {})
    assert decode_worker_frame(b'{"k":"req","id":1,"of":2,"op":"state","a":["get","k"]}') == Ask(1, 2, "state", ["get", "k"])
    refused = {
        b'{"k":"res","id":"7","ok":true}': "Expected `int`, got `str` - at `$.id`",
        b'{"k":"shout","id":1}': "Invalid value 'shout' - at `$.k`",
        b'{"k":"ack","id":1,"running":false,"also":1}': "unknown field `also`",
        b'{"k":"log","of":0,"lv":"info","s":"log"}': "missing required field `m`",
        b'{"k":"res","id":1,"ok":true,"v":NaN}': "malformed",
        b'[1,2]': "Expected `object`, got `array`",
    }
    for body, why in refused.items():
        with pytest.raises(ProtocolError, match="not the protocol's") as raised:
            decode_worker_frame(body)
        assert why in str(raised.value), (body, raised.value)


def test_a_reply_is_decoded_as_its_operations_type() -> None:
    reply = decode_worker_frame(encode(Reply(1, True, msgspec.Raw(b'{"status":5}'))))
    assert isinstance(reply, Reply)
    with pytest.raises(ProtocolError, match=r"its reply to 'hook' is not the protocol's: Expected `str`, got `int` - at `\$.status`"):
        protocol.decode_as(reply.v, HookOutcome, "its reply to 'hook'")


@pytest.mark.parametrize(("frame", "why"), [
    ('{"k":"res","id":"CALL","ok":true,"v":{}}', "Expected `int`, got `str` - at `$.id`"),
    ('{"k":"hello","id":CALL}', "Invalid value 'hello' - at `$.k`"),
    ('{"k":"res","id":CALL,"ok":true,"v":{"status":["ok"]}}', "its reply to 'hook' is not the protocol's: Expected `str`, got `array` - at `$.status`"),
], ids=["wrong-typed-field", "unknown-kind", "reply-of-another-type"])
@SESSION_LOOP
async def test_plugin_code_that_forges_a_frame_gets_its_worker_stopped_with_a_clear_fault(plugin_dir: Path, frame: str, why: str) -> None:
    pool = SandboxPool(SandboxSettings(), "protocol-test")
    try:
        workers = pool.plugin("forger", plugin_dir)
        loaded = await workers.call("load", {"root": str(plugin_dir), "entry": "server/index.py", "gen": 1})
        assert [hook["event"] for hook in loaded["hooks"]] == ["TurnStart"]
        with pytest.raises(WorkerGone) as gone:
            await workers.call("hook", {"gen": 1, "i": 0, "view": VIEW, "payload": {"frame": frame}}, reply=HookOutcome)
        assert "malformed frame" in str(gone.value) and why in str(gone.value), gone.value
        assert workers.faults == 1
        # A fresh worker takes the next call.
        answer = await workers.call("load", {"root": str(plugin_dir), "entry": "server/index.py", "gen": 1})
        assert answer["hooks"]
    finally:
        await pool.close()


@SESSION_LOOP
async def test_a_worker_of_another_protocol_version_is_refused(plugin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The workers are built from the installed code (version PROTOCOL_VERSION); this host says it speaks another.
    monkeypatch.setattr(protocol, "PROTOCOL_VERSION", protocol.PROTOCOL_VERSION + 1)
    pool = SandboxPool(SandboxSettings(), "protocol-test")
    try:
        with pytest.raises(WorkerGone) as gone:
            await pool.plugin("forger", plugin_dir).call("load", {"root": str(plugin_dir), "entry": "server/index.py", "gen": 1})
        expected = (f"does not speak this host's protocol (the worker speaks protocol version {protocol.PROTOCOL_VERSION - 1}, "
                    f"this host {protocol.PROTOCOL_VERSION}")
        assert expected in str(gone.value), gone.value
    finally:
        await pool.close()

