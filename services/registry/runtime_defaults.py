"""The defaults of a compiled runtime (the spec's tables), decided in one place: the compiler fills them in
and docs/plugins.md's generated tables show them."""

from __future__ import annotations

from typing import Any

from shared.manifest.runtime import MAX_RECURSION_DEPTH

# agent.loop defaults by io.visibility (timeoutMs, callTimeoutMs, maxRetries).
LOOP_LIMITS = {"story": (240_000, 120_000, 1), "system": (120_000, 60_000, 3)}
DEFAULT_CORRECTIONS = {"toolUse": 1, "review": 2, "loopPerturbation": 1, "outputRepair": 1}
LOOP_PROFILES: dict[str, dict[str, Any]] = {
    "story": {"stream": True, "steering": True, "truncation": "accept", "fallback": "answer-without-tools"},
    "actor": {"stream": False, "steering": False, "truncation": "reject", "fallback": "answer-without-tools"},
    "system": {"stream": False, "steering": False, "truncation": "reject", "fallback": "fail"},
}
DEFAULT_LOOP_DETECTION = 3
# agent.loop.maxSteps: then the finalizer asks for the answer.
DEFAULT_MAX_STEPS = 8
DEFAULT_MAX_RECURSION_DEPTH = MAX_RECURSION_DEPTH
DEFAULT_IDLE_TIMEOUT_MS = 120_000
DEFAULT_SELF_DATA_FORMAT = "summary"
DEFAULT_SELF_DATA_MAX_ENTRIES = 50
DEFAULT_HANDLER = "./handler.py"
# function.timeoutMs, and the time limit of a guard (an agent runtime's guard has no function block).
DEFAULT_FUNCTION_TIMEOUT_MS = 30_000
# schedule.detached.maxSettleWaitMs, kept with the job's snapshot.
DEFAULT_SETTLE_WAIT_MS = 120_000
KERNEL_INPUT_OPTIONS = ("select", "accepts", "scope", "recordAs", "required")
KERNEL_INPUTS = ("turn-digest@1", "operations@1", "world.dimensions@1", "session.world-context@1")
