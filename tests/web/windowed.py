"""`windowed_web`: the five services and the web front, the gateway's scripted model in a slot that names its
context window (8192 tokens), for the token gauge's tests. Imported by the modules that use it."""

from __future__ import annotations

import pytest_asyncio

from tests.e2e.conftest import running_services
from tests.web.conftest import running_web

# The scripted model, with the context window the gateway reports for it.
SLOTS = "slots:\n  default:\n    provider: scripted\n    context_window: 8192\n"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def windowed_web(tmp_path_factory):
    folder = tmp_path_factory.mktemp("windowed")
    (folder / "slots.yaml").write_text(SLOTS)
    async with (
        running_services(folder / "data", extra_env={"COVEL_GATEWAY_CONFIG": str(folder / "slots.yaml")}) as group,
        running_web(group) as front,
    ):
        yield front
