"""admit_message (services/hooks/admission.py): the session's plugins asked in order, each impl in pluggy
order, the first decision wins; impls that raise or answer the wrong type and plugins that overrun their
bound are skipped; a paused plugin is not asked; a plugin in a sandbox worker answers the same."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from services.hooks.admission import Admission, admit, admitting_plugins, asked_in_order
from services.hooks.common.bounds import ADMIT_TIMEOUT_S
from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from services.hooks.sandboxed_entries import load_sandboxed
from shared.sandbox import SandboxPool, SandboxSettings

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Written only against the spec's signature: admit_message(session_id, message, turn) -> AdmitDecision | None.
GATE = '''
import time

from shared.plugin_sdk.hookspecs import AdmitDecision, hookimpl

ERRORS = []


class Decides:
    """Registered first: pluggy calls it after Faulty."""

    @hookimpl
    def admit_message(self, session_id, message, turn):
        text = message["content"]
        if text.startswith("steer"):
            return AdmitDecision.steer()
        if text.startswith("refuse"):
            return AdmitDecision.refuse(f"{session_id} runs {turn.turn_id} (pending {turn.pending}, running {turn.running})")
        if text.startswith("slow"):
            time.sleep(3)
            return AdmitDecision.refuse("too late")
        return None


class Faulty:
    @hookimpl
    def admit_message(self, session_id, message, turn):
        if "raise" in message["content"]:
            raise RuntimeError("admission bug")
        if "wrong" in message["content"]:
            return "steer"
        return None

    @hookimpl
    def on_error(self, stage, error, message):
        ERRORS.append((stage, str(error)))


def register(covel):
    covel.register_hookimpls(Decides())
    covel.register_hookimpls(Faulty())
'''

QUEUES = '''
from shared.plugin_sdk.hookspecs import AdmitDecision, hookimpl


class Queues:
    @hookimpl
    def admit_message(self, session_id, message, turn):
        return AdmitDecision.queue() if message["content"].startswith("steer") else None


def register(covel):
    covel.register_hookimpls(Queues())
'''

TURN = {"turn_id": "t-running", "step": 2, "pending": 1}


def write(tmp_path: Path, plugin_id: str, code: str, events=("PostRuntime",)) -> PluginEntry:
    root = tmp_path / plugin_id
    (root / "server").mkdir(parents=True)
    (root / "server" / "index.py").write_text(code)
    for path in (root, root / "server", root / "server" / "index.py"):
        path.chmod(0o755)
    # on_error rides on PostRuntime (declared); admit_message on no event.
    return PluginEntry(plugin_id, root, "server/index.py", tuple((event, "normal") for event in events), "builtin")


@pytest.fixture
def loaded(tmp_path: Path):
    result = load_entries([write(tmp_path, "gate", GATE), write(tmp_path, "queues", QUEUES, events=())], generation=1)
    assert result.errors == {}, result.errors
    return result.loaded


def message(content: str) -> dict:
    return {"content": content, "session_id": "s", "channel": "grpc", "actions": [{"kind": "act", "text": content}]}


async def decide(loaded, content: str, active=("gate", "queues"), paused=()) -> Admission:
    return await admit(asked_in_order(loaded, list(active), set(), set(paused)), "s", message(content), TURN)


async def test_a_plugin_implementing_admit_message_loads_and_is_listed(loaded) -> None:
    assert admitting_plugins(loaded) == ["gate", "queues"]
    assert "admit_message" in loaded[0].hookspecs.implemented()


async def test_the_first_decision_wins_and_impls_that_raise_or_answer_wrongly_are_skipped(loaded) -> None:
    module = __import__("sys").modules["covel_plugin_gate_g1.server.index"]
    module.ERRORS.clear()
    assert await decide(loaded, "steer, raise") == Admission("steer", "", "gate")
    assert module.ERRORS == [("admit_message", "admission bug")]
    refused = await decide(loaded, "refuse, wrong")
    assert refused == Admission("refuse", "s runs t-running (pending 1, running True)", "gate")
    # Nobody decides: queue, naming no plugin.
    assert await decide(loaded, "look around") == Admission()


async def test_plugins_are_asked_in_the_sessions_order_and_a_paused_one_is_not(loaded) -> None:
    assert (await decide(loaded, "steer", active=("queues", "gate"))).plugin_id == "queues"
    assert (await decide(loaded, "steer", active=("queues", "gate"), paused=("queues",))) == Admission("steer", "", "gate")
    # Not active in the session: not asked.
    assert await decide(loaded, "steer", active=("queues",)) == Admission("queue", "", "queues")
    assert await decide(loaded, "steer", active=()) == Admission()


async def test_a_plugin_that_overruns_its_bound_is_skipped(loaded) -> None:
    started = time.monotonic()
    assert await decide(loaded, "slow") == Admission()
    assert time.monotonic() - started < ADMIT_TIMEOUT_S + 0.5


async def test_a_sandboxed_plugin_answers_from_its_worker(tmp_path: Path) -> None:
    pool = SandboxPool(SandboxSettings(), "test", data_dir=tmp_path)
    try:
        result = await load_sandboxed(pool, [write(tmp_path, "gate", GATE)], generation=1)
        assert result.errors == {}, result.errors
        assert admitting_plugins(result.loaded) == ["gate"]
        assert await decide(result.loaded, "steer, raise", active=("gate",)) == Admission("steer", "", "gate")
        assert (await decide(result.loaded, "refuse", active=("gate",))).reason.startswith("s runs t-running")
        started = time.monotonic()
        assert await decide(result.loaded, "slow", active=("gate",)) == Admission()
        assert time.monotonic() - started < ADMIT_TIMEOUT_S + 0.5
        # Its worker is replaced after the overrun: the next message is answered all the same.
        assert await decide(result.loaded, "steer", active=("gate",)) == Admission("steer", "", "gate")
    finally:
        await pool.close()
