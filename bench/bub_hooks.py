"""Bub's side of bench.hook_dispatch; runs in Bub's venv (Python >= 3.12), imports no Covel code.

Bub's tool-call guard, `AgentHooks.before_tool_call` (bub/hooks/interception.py), over a pluggy
manager with Bub's hookspecs and 5 plugins implementing `before_tool_call` (plain functions that
return None: let the call proceed), the way Bub's agent loop calls it before each tool.

`python bench/bub_hooks.py` prints one JSON line (Bub's version, Python), then for each line
`N` it reads from stdin, one run of N calls: {"before_tool_call_us": ...}. bench.hook_dispatch
interleaves these runs with its own, so that Covel, pluggy and Bub see the same load.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

HANDLERS = 5


def guard_call():
    """One `before_tool_call` over 5 hookimpls that let the call proceed, ready to await."""
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
    return lambda: hooks.before_tool_call(call, state)


async def serve() -> None:
    guard = guard_call()
    for _ in range(1000):
        await guard()
    for line in sys.stdin:
        rounds = int(line)
        started = time.perf_counter()
        for _ in range(rounds):
            await guard()
        print(json.dumps({"before_tool_call_us": (time.perf_counter() - started) / rounds * 1e6}), flush=True)


def main() -> None:
    import bub

    print(json.dumps({"framework": f"bub {getattr(bub, '__version__', '?')}", "python": sys.version.split()[0],
                      "hookimpls": HANDLERS}), flush=True)
    asyncio.run(serve())


if __name__ == "__main__":
    main()
