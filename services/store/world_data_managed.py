"""Which records a world gave a session (its managed world data): the import at CreateSession writes the list, a
sync (services/store/world_data_sync.py) reads and rewrites it. It lives in the kernel's own partition of the
session's plugin data, which no plugin reads or writes (plugin `framework`, namespace `__kernel:world-data`)."""

from __future__ import annotations

from typing import Any

from services.store.models import PluginDataRow

KERNEL_PLUGIN = "framework"
MANAGED_NAMESPACE = "__kernel:world-data"
MANAGED_KEY = "managed"
Address = tuple[str, str, str]


def managed_row(session_id: str, addresses: list[Address], now: Any) -> PluginDataRow:
    """The row that keeps which records the world gave the session (written with the import)."""
    return PluginDataRow(
        session_id=session_id,
        plugin_id=KERNEL_PLUGIN,
        namespace=MANAGED_NAMESPACE,
        key=MANAGED_KEY,
        value=[list(address) for address in addresses],
        turn_id=None,
        created_at=now,
        updated_at=now,
    )
