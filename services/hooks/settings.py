"""Settings of the hook dispatcher (COVEL_ environment variables)."""

from shared.settings import ServiceSettings


class HooksSettings(ServiceSettings):
    # How long to keep retrying the registry at start before giving up.
    hooks_registry_wait_s: float = 30.0
    # Fault breaker: this many hook faults of one plugin within the window pause its hooks for the session.
    hooks_fault_threshold: int = 3
    hooks_fault_window_s: float = 600.0
