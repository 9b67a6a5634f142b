"""What a run's model calls cost, by runtime: calls, prompt and completion tokens, and how much of each prompt is
the same prefix as that runtime's previous prompt (what a provider's prompt cache can reuse)."""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable

from bench.paced_model import CallRecord

# Calls whose system prompt names no runtime (e.g. a compaction summary or a plugin's own call).
NO_RUNTIME = "(no runtime)"


def shared_prefix(previous: str, prompt: str) -> float:
    """The share of `prompt` (by characters) that is the same prefix as `previous`."""
    return len(os.path.commonprefix([previous, prompt])) / len(prompt) if prompt else 0.0


def by_runtime(calls: Iterable[CallRecord], turns: int) -> dict[str, dict[str, float]]:
    """Per runtime, per turn: calls, prompt and completion tokens; and the mean share of a prompt (each but the
    runtime's first) that repeats the start of its previous prompt, weighted by prompt length."""
    rows: dict[str, dict[str, float]] = {}
    previous: dict[str, str] = {}
    reused: dict[str, list[tuple[float, int]]] = {}
    for call in sorted(calls, key=lambda c: c.started):
        name = call.runtime_id or NO_RUNTIME
        row = rows.setdefault(name, {"calls": 0.0, "prompt_tokens": 0.0, "completion_tokens": 0.0})
        row["calls"] += 1
        row["prompt_tokens"] += call.prompt_tokens
        row["completion_tokens"] += call.completion_tokens
        if name in previous:
            reused.setdefault(name, []).append((shared_prefix(previous[name], call.prompt), len(call.prompt)))
        previous[name] = call.prompt
    for name, row in rows.items():
        for key in ("calls", "prompt_tokens", "completion_tokens"):
            row[key] /= max(1, turns)
        shares = reused.get(name, [])
        weight = sum(length for _, length in shares)
        row["prefix_reuse"] = sum(share * length for share, length in shares) / weight if weight else 0.0
        row["prefix_reuse_p50"] = statistics.median(share for share, _ in shares) if shares else 0.0
    return dict(sorted(rows.items(), key=lambda item: -item[1]["prompt_tokens"]))


def totals(rows: dict[str, dict[str, float]]) -> dict[str, float]:
    prompt = sum(row["prompt_tokens"] for row in rows.values())
    reused = sum(row["prompt_tokens"] * row["prefix_reuse"] for row in rows.values())
    return {"calls": sum(row["calls"] for row in rows.values()), "prompt_tokens": prompt,
            "completion_tokens": sum(row["completion_tokens"] for row in rows.values()),
            "prefix_reuse": reused / prompt if prompt else 0.0}
