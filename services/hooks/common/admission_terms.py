"""admit_message's name and the actions its decision may take (host: services/hooks/admission.py; where the
plugin's code runs: plugin_side/admission.py)."""

from __future__ import annotations

HOOK = "admit_message"
ACTIONS = ("queue", "steer", "refuse")
