"""Bub's side of bench.bub_compare; runs in its own venv (Bub needs Python >= 3.12), imports no Covel code.

A turn is `BubFramework.process_inbound` of one message with Bub's builtin hooks (session,
state, prompt, its agent loop over the session tape, outbound rendering): the whole pipeline
runs except the provider call, which is a fake: `ModelRunner.completion_response` returns a
fixed story text at once, so Bub's before/after_llm_call interception still fires. On top of
the builtins, `--hooks N` extra hookimpls are registered, one per turn stage as listed in
EXTRA_HOOKS (the first adds the narrative-person line to the system prompt, like Covel's
narrator PostContextAssembly handler; the others observe and return nothing).

`python bench/bub_turn.py --turns 40 --hooks 1` prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

STORY = (
    "You push the door open. The hinges complain, and a draught carries the smell of rain into the hall.\n\n"
    "Mara: \u201cYou came back. I did not think you would.\u201d\n\n"
    "Somewhere upstairs a floorboard answers your step, and the lamp on the table gutters once."
)
PERSON_RULE = 'Narrative person: second. Address the player\'s character as "you".'


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def build_extra_hooks(hookimpl, count: int, calls: list[str]):
    """Plugin objects with `count` hookimpls, in this order (Covel's analogue in brackets); each call is noted in `calls`."""

    class Narrator:
        @hookimpl
        def system_prompt(self, prompt, state):  # [narrator PostContextAssembly: systemPrompt + person rule]
            calls.append("system_prompt")
            return PERSON_RULE

    class TurnStart:
        @hookimpl
        def load_state(self, message, session_id):  # [TurnStart]
            calls.append("load_state")
            return {}

    class BeforeLlm:
        @hookimpl
        def before_llm_call(self, request, state):  # [PreLLMCall]
            calls.append("before_llm_call")
            return None

    class AfterLlm:
        @hookimpl
        def after_llm_call(self, request, result, state):  # [PostLLMResponse]
            calls.append("after_llm_call")
            return None

    class TurnStop:
        @hookimpl
        def save_state(self, session_id, state, message, model_output):  # [TurnStop]
            calls.append("save_state")
            return None

    class Committed:
        @hookimpl
        def dispatch_outbound(self, message):  # [PostStateCommit]
            calls.append("dispatch_outbound")
            return False

    kinds = [Narrator, TurnStart, BeforeLlm, AfterLlm, TurnStop, Committed]
    if count > len(kinds):
        raise SystemExit(f"--hooks {count}: at most {len(kinds)} (one per mapped turn stage)")
    return [kind() for kind in kinds[:count]]


async def measure(turns: int, warmup: int, hooks: int) -> dict:
    import bub
    from any_llm.types.completion import ChatCompletion, ChatCompletionMessage, Choice, CompletionUsage
    from bub.builtin.model_runner import ModelRunner
    from bub.framework import BubFramework
    from bub.hooks import hookimpl
    from loguru import logger

    # Bub logs every step at INFO; the Covel services run at warning in these benchmarks too.
    logger.remove()
    logger.add(sys.stderr, level="WARNING")

    async def fake_completion(self, *, model, messages, tools, max_tokens=None, reasoning_effort=None):
        return ChatCompletion(
            id="fake", created=0, model="fake", object="chat.completion",
            choices=[Choice(index=0, finish_reason="stop", message=ChatCompletionMessage(role="assistant", content=STORY))],
            usage=CompletionUsage(prompt_tokens=sum(len(str(m.get("content", ""))) for m in messages) // 4,
                                  completion_tokens=len(STORY) // 4, total_tokens=0),
        )

    ModelRunner.completion_response = fake_completion  # the provider call is the only part replaced
    framework = BubFramework(config_file=Path(os.environ["BUB_HOME"]) / "config.yml")
    framework.load_builtin_hooks()
    calls: list[str] = []
    for index, plugin in enumerate(build_extra_hooks(hookimpl, hooks, calls)):
        framework.plugin_manager.register(plugin, name=f"bench-{index}")
    timings: list[float] = []
    async with framework.running():
        for index in range(warmup + turns):
            inbound = {"content": f"I walk on, step {index}.", "session_id": "bench", "channel": "bench", "chat_id": "1"}
            started = time.perf_counter()
            result = await framework.process_inbound(inbound)
            elapsed = (time.perf_counter() - started) * 1000
            if result.model_output != STORY:
                raise SystemExit(f"Bub's turn did not return the fake model's text: {result.model_output[:200]!r}")
            if index >= warmup:
                timings.append(elapsed)
    tapes = Path(os.environ["BUB_HOME"]) / "tapes"
    return {
        # Bub's session tape: JSONL files appended each turn (Covel commits each turn to SQLite).
        "tape_files": len(list(tapes.glob("*"))) if tapes.is_dir() else 0,
        "framework": f"bub {getattr(bub, '__version__', '?')}", "python": sys.version.split()[0], "turns": turns,
        "extra_hookimpls": hooks, "extra_hook_calls_per_turn": len(calls) / (warmup + turns),
        "plugins_registered": len(framework.plugin_manager.get_plugins()),
        "turn_ms": {"p50": percentile(timings, 0.5), "p95": percentile(timings, 0.95), "mean": statistics.fmean(timings),
                    "n": len(timings)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--hooks", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        # Bub keeps its config and session tapes under BUB_HOME: a fresh one per run.
        os.environ["BUB_HOME"] = home
        os.environ.setdefault("BUB_MODEL", "openai:fake")
        os.environ.setdefault("BUB_API_KEY", "unused")
        result = asyncio.run(measure(args.turns, args.warmup, args.hooks))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
