"""The scheduler's servicer composed of the api/ modules (services/scheduler/server.py): every RPC of
covel.scheduler.v1.Scheduler served by exactly one part; the auto-advance chains Cancel stops."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from covel.scheduler.v1 import scheduler_pb2
from services.scheduler import api
from services.scheduler.api.advance_chains import AdvanceChains
from services.scheduler.server import RPCS, SchedulerService


def test_every_rpc_is_defined_by_one_api_part() -> None:
    parts = [value for info in pkgutil.iter_modules(api.__path__)
             for value in vars(importlib.import_module(f"{api.__name__}.{info.name}")).values()
             if inspect.isclass(value) and value.__module__.startswith(api.__name__) and set(vars(value)) & set(RPCS)]
    # Each RPC once: two parts defining one would leave one of them unreachable.
    assert set(RPCS) == set(scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"].methods_by_name) and len(RPCS) == len(set(RPCS))
    service = SchedulerService(*(part.__new__(part) for part in parts))
    for name in RPCS:
        assert getattr(service, name).__func__ is vars(type(getattr(service, name).__self__))[name]


def test_an_rpc_served_twice_or_not_at_all_is_refused() -> None:
    class One:
        async def GetSession(self, request, context): ...

    with pytest.raises(TypeError, match="CreateSession is served by 0 parts"):
        SchedulerService(One())
    with pytest.raises(TypeError, match="CreateSession is served by 2 parts"):
        SchedulerService(*[type("Part", (), {name: None for name in RPCS})() for _ in range(2)])


def test_cancel_stops_the_chains_of_a_session_until_they_close() -> None:
    chains = AdvanceChains()
    first, second, other = chains.open("s-1"), chains.open("s-1"), chains.open("s-2")
    assert chains.stop("s-1", "cancelled by request")
    assert first.reason == second.reason == "cancelled by request" and not other.is_set()
    chains.close("s-1", first)
    chains.close("s-1", second)
    assert not chains.stop("s-1", "again")
    assert chains.stop("s-2", "cancelled: bye") and other.reason == "cancelled: bye"
