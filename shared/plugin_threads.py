"""Plugin code that is not async runs in a bounded pool of worker threads, never on the event loop.

A plain `def` hook handler, tool, extension provider or event-key handler blocks whatever
thread calls it; on the event loop that would stall every session the service serves. So it
runs here, and the caller awaits it under the plugin's timeout. A thread cannot be killed:
one that overruns keeps its slot until it returns, and what it returns is discarded. The pool
is the plugin code's own, so overrunning threads never starve the loop's default executor
(entry loading, file reads). When every slot is busy, calls queue in order; a queued call whose
caller stops waiting (timeout, cancellation) is dropped before it starts.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

PLUGIN_THREADS = 32

_pool = ThreadPoolExecutor(max_workers=PLUGIN_THREADS, thread_name_prefix="plugin-code")
# Who started a thread (a sandbox worker's call id): its threads are counted while they run, so the
# worker can tell the host that a cancelled call still runs on (shared/sandbox/worker.py).
thread_owner: contextvars.ContextVar[Any] = contextvars.ContextVar("plugin_thread_owner", default=None)
_running: Counter[Any] = Counter()
_running_lock = threading.Lock()


def threads_running(owner: Any) -> int:
    with _running_lock:
        return _running[owner]


def _counted(function: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    owner = thread_owner.get()
    if owner is None:
        return function(*args, **kwargs)
    with _running_lock:
        _running[owner] += 1
    try:
        return function(*args, **kwargs)
    finally:
        with _running_lock:
            _running[owner] -= 1
            if not _running[owner]:
                del _running[owner]


def in_plugin_thread(function: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Future:
    """`function(*args, **kwargs)` in a plugin thread, with the caller's context variables (log
    fields, trace span). Cancelling the future drops a call that has not started yet."""
    context = contextvars.copy_context()
    return asyncio.get_running_loop().run_in_executor(_pool, context.run, _counted, function, args, kwargs)


async def call_sync(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A plain function in a plugin thread; an awaitable it returns is awaited on the loop."""
    outcome = await in_plugin_thread(function, *args, **kwargs)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    return outcome


def call_plugin_code(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    """What `function(*args, **kwargs)` gives, as an awaitable that never blocks the loop: a
    coroutine function is called here, anything else runs in a plugin thread."""
    if inspect.iscoroutinefunction(function):
        return function(*args, **kwargs)
    return call_sync(function, *args, **kwargs)
