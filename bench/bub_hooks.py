"""Bub's side of bench.hook_dispatch; runs in Bub's venv (Python >= 3.12), imports no Covel code.

Bub's tool-call guard, `AgentHooks.before_tool_call` (bub/hooks/interception.py), over a pluggy
manager with Bub's hookspecs and 5 plugins implementing `before_tool_call` (plain functions that
return None: let the call proceed), the way Bub's agent loop calls it before each tool.

`python bench/bub_hooks.py --rounds 20000` prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

HANDLERS = 5
REPEATS = 5


async def per_call_us(rounds: int) -> float:
    import pluggy
    from bub.hooks import BUB_HOOK_NAMESPACE, BubHookSpecs, hookimpl
    from bub.hooks.interception import AgentHooks, ToolCall
    from bub.hooks.runtime import HookRuntime

    class Allow:
        @hookimpl
        def before_tool_call(self, call, state):
            return None

    manager = pluggy.PluginManager(BUB_HOOK_NAMESPACE)
    manager.add_hookspecs(BubHookSpecs)
    for index in range(HANDLERS):
        manager.register(Allow(), name=f"bench-{index}")
    hooks = AgentHooks(HookRuntime(manager))
    call = ToolCall(run_id="run-1", tool="roll_dice", arguments={"sides": 20, "count": 1})
    state: dict = {}
    for _ in range(1000):
        await hooks.before_tool_call(call, state)
    best = float("inf")
    # The best of a few runs: the machine is shared, and the best run is the least disturbed one.
    for _ in range(REPEATS):
        started = time.perf_counter()
        for _ in range(rounds):
            await hooks.before_tool_call(call, state)
        best = min(best, (time.perf_counter() - started) / rounds * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20_000)
    args = parser.parse_args()
    import bub

    result = {"framework": f"bub {getattr(bub, '__version__', '?')}", "python": sys.version.split()[0],
              "hookimpls": HANDLERS, "before_tool_call_us": asyncio.run(per_call_us(args.rounds))}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
