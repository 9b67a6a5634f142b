"""ctx.progress: a function's progress jobs, streamed to the client as `progress` turn events.

`await ctx.progress.report(job_id, label, done=, total=)` reports a job; `finish(job_id,
status)` ends one. Jobs are keyed by (runtime, job id) and numbered, so a repeated report is
dropped; nested calls report in their root execution's range with their own runtime id. Jobs
still open when the root runtime ends finish with it: succeeded, or cancelled when it failed.
"""

from __future__ import annotations

from typing import Any

from covel.scheduler.internal.v1 import turn_events_pb2
from services.scheduler.execution.runtime_scope import Emit

STATUSES = ("running", "succeeded", "failed", "cancelled")


class ProgressRange:
    """The progress jobs of one root execution (shared with its nested calls)."""

    def __init__(self, emit: Emit) -> None:
        self._emit_event = emit
        # (runtime id, job id) -> (last seq, status, label)
        self.jobs: dict[tuple[str, str], tuple[int, str, str]] = {}

    def reporter(self, runtime_id: str) -> ProgressReporter:
        return ProgressReporter(self, runtime_id)

    async def _emit(self, runtime_id: str, job_id: str, label: str, done: float, total: float, status: str,
                    seq: int | None) -> None:
        last, current, known_label = self.jobs.get((runtime_id, job_id), (0, "running", ""))
        if current != "running":
            return  # an ended job does not start again
        seq = last + 1 if seq is None else seq
        if seq <= last:
            return  # already reported
        self.jobs[(runtime_id, job_id)] = (seq, status, label or known_label)
        await self._emit_event(turn_events_pb2.TurnEvent(progress=turn_events_pb2.RuntimeProgress(
            runtime_id=runtime_id, job_id=job_id, seq=seq, label=label or known_label, done=done, total=total, status=status)))

    async def close(self, succeeded: bool) -> None:
        for (runtime_id, job_id), (_, status, label) in list(self.jobs.items()):
            if status == "running":
                await self._emit(runtime_id, job_id, label, 0, 0, "succeeded" if succeeded else "cancelled", None)


class ProgressReporter:
    def __init__(self, progress_range: ProgressRange, runtime_id: str) -> None:
        self._range = progress_range
        self._runtime_id = runtime_id

    async def report(self, job_id: str, label: str = "", *, done: float = 0, total: float = 0, seq: int | None = None) -> None:
        _check(job_id, done, total)
        await self._range._emit(self._runtime_id, job_id, str(label)[:200], float(done), float(total), "running", seq)

    async def finish(self, job_id: str, status: str = "succeeded", label: str = "") -> None:
        _check(job_id, 0, 0)
        if status not in STATUSES[1:]:
            raise ValueError(f"progress.finish({job_id!r}, {status!r}): status is succeeded, failed or cancelled")
        await self._range._emit(self._runtime_id, job_id, str(label)[:200], 0, 0, status, None)


def _check(job_id: Any, done: Any, total: Any) -> None:
    if not isinstance(job_id, str) or not job_id or len(job_id) > 120:
        raise ValueError("progress: job_id is a string of 1-120 characters")
    if not isinstance(done, int | float) or not isinstance(total, int | float) or done < 0 or total < 0:
        raise ValueError("progress: done and total are numbers >= 0")
