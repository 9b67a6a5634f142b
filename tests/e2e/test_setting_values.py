"""CreateSession checks the player's plugin setting values against the packages' contributes.settings:
a wrong one is INVALID_ARGUMENT naming the field and what to do, and no session is created."""

from __future__ import annotations

import grpc
import pytest

from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from shared.errors import field_violations
from shared.grpc_client import open_channel
from shared.structs import from_struct, to_struct

# Its own sessions only: the session's shared group (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "rules-probe"


async def create(services, settings: dict) -> scheduler_pb2.CreateSessionResponse:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        return await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["narrator", PROBE], approved_plugins=[PROBE],
            plugin_settings={plugin: to_struct(values) for plugin, values in settings.items()}))


@pytest.mark.parametrize(("settings", "field", "description"), [
    ({"narrator": {"person": "first"}}, "plugin_settings.narrator.person",
     "must be one of second, third, not 'first'; pick one of them or leave it out to use the default ('second')"),
    ({"dice-check": {"dc": "hard"}}, "plugin_settings.dice-check.dc",
     "must be a whole number, not 'hard'; send a whole number or leave it out to use the default (12)"),
    ({"dice-check": {"dc": 40}}, "plugin_settings.dice-check.dc",
     "must be between 2 and 30, not 40; send a value in range or leave it out to use the default (12)"),
    ({"narrator": {"voice": "warm"}}, "plugin_settings.narrator.voice",
     "plugin narrator has no setting 'voice' (it declares: person); remove it or fix its name"),
    ({"framework": {"maxAutoAdvance": -1}}, "plugin_settings.framework.maxAutoAdvance",
     "must be at least 0, not -1; send a value in range or leave it out"),
    ({"no-such-plugin": {"x": 1}}, "plugin_settings.no-such-plugin",
     "no plugin 'no-such-plugin' is installed; remove its settings, or install it and request it"),
])
async def test_a_wrong_setting_value_is_refused_and_nothing_is_created(services, tmp_path, settings, field, description) -> None:
    marker = tmp_path / "sessions.log"
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create(services, {**settings, PROBE: {"marker": str(marker)}})
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == f"{field}: {description}"
    assert [(v.field, v.description) for v in field_violations(raised.value)] == [(field, description)]
    assert not marker.exists(), "no session was created: SessionStart never ran"


async def test_declared_values_in_range_are_kept(services, tmp_path) -> None:
    marker = tmp_path / "sessions.log"
    created = await create(services, {"narrator": {"person": "third"}, "dice-check": {"dc": 11},
                                      "framework": {"maxAutoAdvance": 0}, PROBE: {"marker": str(marker)}})
    assert from_struct(created.session.plugin_settings["narrator"]) == {"person": "third"}
    assert marker.read_text().startswith(f"SessionStart:{created.session.id}:")
