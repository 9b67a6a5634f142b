"""Time bounds of plugin code both sides keep: the side that runs the code bounds it, the host bounds its call
to the worker a little above (so the worker's own bound is the one that answers)."""

from __future__ import annotations

# admit_message, per plugin: a submit waits for its admission, so one slow plugin must not hold it long.
ADMIT_TIMEOUT_S = 1.0
# Entering one lifespan (the load's bound: services/hooks/sandboxed_entries.py LOAD_TIMEOUT_S).
ENTER_TIMEOUT_S = 30.0
# Leaving all of one generation's lifespans.
EXIT_TIMEOUT_S = 5.0
