"""Run kernel extension providers (`covel.provide_extension(point, id, provider)`).

A provider is `provider(ctx, input)`, sync or async, returning JSON. Like a tool, a provider
that raises, passes its time or returns something that is not JSON gives a failed answer with
the reason, never a failure of the hooks service. A plain `def` provider runs in a plugin thread
under the same time limit (shared/plugin_threads.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from shared.plugin_sdk.registrar import ExtensionRegistration
from shared.plugin_sdk.tools import ToolContext
from shared.plugin_threads import call_plugin_code

DEFAULT_TIMEOUT_S = 30.0


@dataclass
class ExtensionAnswer:
    plugin_id: str
    id: str
    ok: bool
    output: Any = None
    error: str = ""
    duration_us: int = 0


async def call_extension(extension: ExtensionRegistration, context: ToolContext, payload: Any,
                         timeout_s: float = DEFAULT_TIMEOUT_S) -> ExtensionAnswer:
    started = time.perf_counter()

    def answer(ok: bool, output: Any = None, error: str = "") -> ExtensionAnswer:
        return ExtensionAnswer(extension.plugin_id, extension.id, ok, output, error, int((time.perf_counter() - started) * 1e6))

    try:
        outcome = await asyncio.wait_for(call_plugin_code(extension.provider, context, payload), timeout_s)
    except TimeoutError:
        context.signal.abort("timeout")
        return answer(False, error=f"{extension.point}/{extension.id} did not answer within {timeout_s:.0f} s")
    except Exception as error:  # plugin code
        return answer(False, error=f"{extension.point}/{extension.id} raised {type(error).__name__}: {error}")
    try:
        json.dumps(outcome)
    except (TypeError, ValueError):
        return answer(False, error=f"{extension.point}/{extension.id} returned a value that is not JSON ({type(outcome).__name__})")
    return answer(True, outcome)


def ordered_providers(extensions: list[ExtensionRegistration]) -> list[ExtensionRegistration]:
    """Providers in `order`, then plugin id, then id: the same order on every replica."""
    return sorted(extensions, key=lambda e: (e.order, e.plugin_id, e.id))
