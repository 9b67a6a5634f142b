"""Settings of the hook dispatcher (COVEL_ environment variables)."""

from shared.settings import ServiceSettings


class HooksSettings(ServiceSettings):
    # How long to keep retrying the registry at start before giving up.
    hooks_registry_wait_s: float = 30.0
