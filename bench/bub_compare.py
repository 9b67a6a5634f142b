"""Side by side with Bub (PyPI `bub`, a hook-first agent runtime on pluggy): a comparable turn.

`python -m bench.bub_compare --turns 40`. The turn: one player message in, one story out, a
fake model that answers at once, and the same number of plugin hook implementations:

- Covel: the default session's turn (the narrator's story runtime, one streamed model call
  to the offline scripted model, the turn committed to SQLite), with 1 plugin hook (the
  narrator's PostContextAssembly adds the narrative-person line) and with 6 (plus a
  generated plugin observing TurnStart, PreLLMCall, PostLLMResponse, TurnStop,
  PostStateCommit), and with the same 6 where the 5 are watchers (observe=True: the turn holds
  TurnStart, PreLLMCall and PostLLMResponse for one DispatchObserved, one round trip to the
  plugin's worker); as five processes and as one process (covel_cli/in_process.py).
- Bub: `BubFramework.process_inbound` with its builtin hooks and its agent loop over the
  session tape (JSONL files), the provider call replaced by a fixed story text; with 1 extra
  hookimpl (system_prompt adds the same line) and 6 (plus load_state, before_llm_call,
  after_llm_call, save_state, dispatch_outbound). See bench/bub_turn.py.

Not the same work: Covel's scripted model writes a story JSON (segments, speakers) that
the scheduler checks and normalises; it keeps a lease, a trace and one database
transaction per turn, and crosses gRPC for every service call. Bub's fake returns a fixed
text in process. Bub needs Python >= 3.12 and runs in its own venv (`make bench` makes
.venv/bub from the `bench` extra of pyproject.toml); Covel runs on this venv's Python.
Writes bench/results/bub_compare.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from bench.common import (
    IN_PROCESS,
    PROCESSES,
    create_session,
    play_turn,
    plugin_dirs_env,
    running_services,
    summarize,
    table,
    write_observer_plugin,
    write_result,
)
from bench.turn_costs import cpu_seconds
from covel.scheduler.v1 import scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT

OBSERVERS = "bench-observers"
# The same handlers as watchers (observe=True): what they return changes nothing, so the kernel may hold their events.
WATCHERS = "bench-watchers"
OBSERVED_EVENTS = ("TurnStart", "PreLLMCall", "PostLLMResponse", "TurnStop", "PostStateCommit")
BUB_SCRIPT = Path(__file__).with_name("bub_turn.py")
BUB_VENV_PYTHON = REPO_ROOT / ".venv" / "bub" / "bin" / "python"
HOOK_COUNTS = (1, 1 + len(OBSERVED_EVENTS))


def _parents() -> dict[int, int]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return found


def tree_cpu_s(roots: list[int]) -> float:
    """CPU seconds so far of `roots` and every process below them (the hooks service's zygote and sandbox workers)."""
    parents = _parents()
    chosen, grew = set(roots), True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in chosen} - chosen
        grew = bool(below)
        chosen |= below
    total = 0.0
    for pid in chosen:
        try:
            total += cpu_seconds(pid)
        except (OSError, ValueError, IndexError):  # a process that ended meanwhile
            continue
    return total


def bench_requirements() -> list[str]:
    """The `bench` extra of pyproject.toml without environment markers (for the Bub venv)."""
    extra = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["bench"]
    return [re.split(r"\s*;", requirement)[0] for requirement in extra]


def bub_python() -> str | None:
    """An interpreter that can import bub: this one, COVEL_BENCH_BUB_PYTHON, or .venv/bub."""
    candidates = [sys.executable, os.environ.get("COVEL_BENCH_BUB_PYTHON", ""), str(BUB_VENV_PYTHON)]
    for candidate in filter(None, candidates):
        if Path(candidate).exists() and subprocess.run([candidate, "-c", "import bub.framework"], capture_output=True).returncode == 0:
            return candidate
    return None


async def covel_side(mode: str, turns: int, warmup: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        write_observer_plugin(Path(folder) / OBSERVERS, "no-op turn observers", OBSERVED_EVENTS)
        write_observer_plugin(Path(folder) / WATCHERS, "no-op turn watchers", OBSERVED_EVENTS, watch=True)
        async with running_services(mode, extra_env=plugin_dirs_env(Path(folder))) as group:
            async with open_channel(group.addrs["scheduler"]) as channel:
                stub = scheduler_pb2_grpc.SchedulerStub(channel)
                for hooks, extra in ((HOOK_COUNTS[0], []), (HOOK_COUNTS[1], [OBSERVERS]), (HOOK_COUNTS[1], [WATCHERS])):
                    session = await create_session(stub, requested_plugins=extra, approved_plugins=extra)
                    timings, cpu = [], 0.0
                    # The five processes, or this one (the services in its loop, and this client); their workers too.
                    roots = [process.pid for process in getattr(group, "processes", {}).values()] or [os.getpid()]
                    for index in range(warmup + turns):
                        if index == warmup and roots:
                            cpu = tree_cpu_s(roots)
                        elapsed, _, turn = await play_turn(stub, session.id, f"I walk on, step {index}.")
                        # A PostStateCommit only watchers take is heard after the turn answered: not in its record.
                        expected = hooks - (extra == [WATCHERS])
                        if len(turn.hook_trace) != expected:
                            raise RuntimeError(f"expected {expected} hook calls in the turn, the trace has {len(turn.hook_trace)}")
                        if index >= warmup:
                            timings.append(elapsed)
                    cpu_ms = round((tree_cpu_s(roots) - cpu) * 1000 / turns, 2) if roots else None
                    rows.append({"framework": f"covel, {mode}", "python": sys.version.split()[0], "plugin_hooks": hooks,
                                 "watching": extra == [WATCHERS], "turn_ms": summarize(timings), "cpu_ms_per_turn": cpu_ms})
    return rows


def bub_side(python: str, turns: int, warmup: int) -> list[dict]:
    rows = []
    for hooks in HOOK_COUNTS:
        done = subprocess.run([python, str(BUB_SCRIPT), "--turns", str(turns), "--warmup", str(warmup), "--hooks", str(hooks)],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"Bub's turn failed:\n{done.stderr[-2000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if result["extra_hook_calls_per_turn"] != hooks:
            raise RuntimeError(f"Bub ran {result['extra_hook_calls_per_turn']} extra hook calls a turn, expected {hooks}")
        rows.append({"framework": result["framework"], "python": result["python"], "plugin_hooks": hooks,
                     "turn_ms": result["turn_ms"]})
    return rows


def render(rows: list[dict]) -> str:
    return table(["framework", "python", "plugin hooks", "turn p50 ms", "turn p95 ms", "CPU ms a turn (all processes)"],
                 [[r["framework"], r["python"], f"{r['plugin_hooks']}{' (5 watching)' if r.get('watching') else ''}",
                   r["turn_ms"]["p50"], r["turn_ms"]["p95"], r.get("cpu_ms_per_turn") or "—"] for r in rows])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--requirements", action="store_true", help="print the Bub venv's requirements and exit (Makefile)")
    args = parser.parse_args(argv)
    if args.requirements:
        print(" ".join(bench_requirements()))
        return {}
    rows = asyncio.run(covel_side(PROCESSES, args.turns, args.warmup))
    python = bub_python()
    skipped = ""
    if python is None:
        skipped = "Bub is not installed: it needs Python >= 3.12 (make bench builds .venv/bub when one is on PATH or in pyenv)"
    else:
        rows += bub_side(python, args.turns, args.warmup)
    # Last: the in-process services set this process' environment.
    rows += asyncio.run(covel_side(IN_PROCESS, args.turns, args.warmup))
    result = {"rows": rows, "bub_skipped": skipped}
    write_result("bub_compare", result)
    print(f"a comparable turn: one message in, one story out, instant fake model ({args.turns} turns in one session):")
    print(render(rows))
    if skipped:
        print(f"Bub: skipped, {skipped}")
    return result


if __name__ == "__main__":
    main()
