"""What every hook payload record is: one event's payload, typed, that names its event and gives its wire dict."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from shared.hook_events import EVENTS_BY_NAME


class HookPayload(ABC):
    """One hook event's payload. `event` is the event it is dispatched as (shared/hook_events.py); `wire()` is
    the payload as plugins read it: the contract's camelCase JSON (docs/hooks.md)."""

    event: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.event not in EVENTS_BY_NAME:
            raise TypeError(f"{cls.__name__}.event: {cls.event!r} is not a hook event of shared/hook_events.py")

    @abstractmethod
    def wire(self) -> dict[str, Any]:
        """The payload sent to the hooks service (and tested against the handlers' declarative matches)."""


# id(manifest) -> (the manifest, its wire form): a compiled manifest never changes once built (the plugin cache keeps
# one per catalogue generation), and a demo turn asks for its thirty runtimes' twice (PreSchedule, PreRuntime).
_MANIFESTS: dict[int, tuple[Any, dict[str, Any]]] = {}
MANIFESTS_KEPT = 4096


def runtime_manifest(runtime: Any) -> dict[str, Any]:
    """A runtime's compiled manifest as hooks read it (PreSchedule's entries, PreRuntime's manifest): the registry's
    compiled form, camelCase (docs/plugins.md "Compiled manifests"). Built once per manifest: read it, never change it."""
    manifest = runtime.manifest
    cached = _MANIFESTS.get(id(manifest))
    if cached is None or cached[0] is not manifest:
        if len(_MANIFESTS) >= MANIFESTS_KEPT:
            _MANIFESTS.clear()
        cached = _MANIFESTS[id(manifest)] = (manifest, manifest.to_json())
    return cached[1]
