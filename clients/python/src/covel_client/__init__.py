"""Covel's public API (covel.scheduler.v1) for Python: `Client` (asyncio, with the kernel's retry rules),
`CovelError` (a failed call's google.rpc details decoded), `events_of` (the events of one message of a turn stream
that asked for batches) and the generated messages under `covel_client.v1`."""

from covel_client.client import Client, events_of
from covel_client.errors import CovelError

__all__ = ["Client", "CovelError", "events_of"]
