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


def runtime_manifest(runtime: Any) -> dict[str, Any]:
    """A runtime's compiled manifest as hooks read it (PreSchedule's entries, PreRuntime's manifest): the registry's
    compiled form, camelCase (docs/plugins.md "Compiled manifests")."""
    return runtime.manifest.to_json()
