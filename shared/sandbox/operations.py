"""The operations a sandbox worker serves, by name, and the modules that provide them.

A service whose plugin code runs in workers registers the module that holds its operations (a
module-level OPERATIONS: name -> Operation, an async (server, call, args) -> reply with the type its
arguments are decoded to: shared/sandbox/protocol.py) before its pool starts
workers: `register_operations("services.<name>.plugin_side.operations")`, by name, so the service's
own process never imports what runs beside plugin code. The sandbox imports no service: the pool hands
the names of the registered modules to its zygote (shared/sandbox/zygote.py, preloaded before it forks)
and to every worker it starts (its config), and the worker imports and registers them in its own process
(`load_operations`). The function runtimes' operation (function_context.py) is the sandbox's own.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared.sandbox.worker_server import Call, WorkerServer


@dataclass(frozen=True)
class Operation:
    """What the worker does for one call: `run(server, call, args)` with `args` decoded as `args_type` (a msgspec
    Struct, or any type msgspec decodes); its answer (a Struct or JSON data) is the reply the host decodes."""

    run: Callable[[WorkerServer, Call, Any], Awaitable[Any]]
    args: Any


OPERATIONS: dict[str, Operation] = {}
_MODULES: list[str] = ["shared.sandbox.function_context"]


def register_operations(module: ModuleType | str) -> None:
    """`module`'s OPERATIONS, served by this process's workers from now on (registering again changes nothing).
    A module name is only recorded here (imported where workers run); a module is also registered in this process."""
    name = module if isinstance(module, str) else module.__name__
    if name not in _MODULES:
        _MODULES.append(name)
    if not isinstance(module, str):
        OPERATIONS.update(module.OPERATIONS)


def operation_modules() -> list[str]:
    """The modules registered in this process, which the zygote and every worker import."""
    return list(_MODULES)


def load_operations(modules: Iterable[str]) -> None:
    """In the zygote and in a worker: import each module and register its operations."""
    for name in modules:
        register_operations(importlib.import_module(name))
