"""Hypothesis profiles of the fuzz suite: `short` (the default, in `make test`) and `long` (`make fuzz`).

COVEL_FUZZ_PROFILE picks one. Failing examples are kept in Hypothesis' database (.hypothesis/ in
the working folder, ignored by git) and replayed first on the next run.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("COVEL_FUZZ_PROFILE", "short")
if PROFILE not in ("short", "long"):
    raise ValueError(f"COVEL_FUZZ_PROFILE={PROFILE!r}: use short (the default) or long")

# Real servers on a shared machine: an example's time says nothing, the properties bound it themselves.
_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large], "print_blob": True}
settings.register_profile("covel-fuzz-short", **_COMMON)
settings.register_profile("covel-fuzz-long", **_COMMON)


def fuzzed(*, short: int, long: int) -> settings:
    """The chosen profile's settings with this property's number of examples."""
    return settings(settings.get_profile(f"covel-fuzz-{PROFILE}"), max_examples=short if PROFILE == "short" else long)
