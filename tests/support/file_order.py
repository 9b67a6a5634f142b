"""The suite's files in the order that finishes soonest on pytest-xdist's workers: the longest first.

`make test` runs `-n 2 --dist loadfile`: a file's tests stay on one worker, and a worker asks for the next
file in collection order when it is done. Collected alphabetically, the longest files (the player page's
browser tests, the Go client, `covel up`) came last and one worker ran them alone for minutes. Sorted by
their measured time (tests/file_durations.json), longest first, the workers end within a file of each other
(longest processing time first). `pytest --record-file-durations` writes that file from the run's own
times; a file it does not name yet counts as the median. Tests inside a file keep their order.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent.parent / "file_durations.json"


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def recorded() -> dict[str, float]:
    try:
        return {str(name): float(seconds) for name, seconds in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def longest_first(items: list[pytest.Item], durations: dict[str, float]) -> list[pytest.Item]:
    """`items` with whole files moved, the longest first (stable: equal files keep collection order)."""
    default = statistics.median(durations.values()) if durations else 0.0
    by_file: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        by_file[_file_of(item.nodeid)].append(item)
    ordered = sorted(by_file, key=lambda name: -durations.get(name, default))
    return [item for name in ordered for item in by_file[name]]


class FileDurations:
    """`--record-file-durations`: each file's time in this run (setup, call and teardown), written at its end."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[_file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.seconds and not hasattr(session.config, "workerinput"):
            rounded = {name: round(seconds, 1) for name, seconds in sorted(self.seconds.items())}
            DURATIONS.write_text(json.dumps(rounded, indent=0, sort_keys=True) + "\n")
