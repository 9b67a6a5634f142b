"""Subagents: `ctx.agents.run(...)` in function runtimes and the builtin `delegate` tool in agents.

A subagent is another agent runtime (a `schedule.subagentOnly` provider) run inside the
caller's execution with its own conversation and budget; it only hands back output. The
limits are per root execution, shared by its nested runs (ctx.recursive_call): at most 8 running
at once, depth 1 (a subagent gets neither delegate nor ctx.agents), and the session's
maxSubagentCalls admitted calls and maxActors distinct characters (subagent_limits).
Failures never raise: the caller gets `{ok: false, error: {code, message}, stopReason?}`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.scheduler.catalogue import Runtime
from services.scheduler.execution.character_brief import MAX_ASSEMBLED_CHARS, character_brief, witnessed_story
from services.scheduler.execution.outcome import StopReason
from services.scheduler.kinds import RuntimeType
from shared.ids import new_id
from shared.logs import get_logger
from shared.manifest import CompiledManifest

log = get_logger(component="subagents")

MAX_BRIEF_CHARS = 20_000
MAX_DATA_BYTES = 32 * 1024
MAX_CONCURRENT = 8
DEFAULT_MAX_SUBAGENT_CALLS = 16
DEFAULT_MAX_ACTORS = 4
# The ranges of the two session settings (spec: 执行名额); 0 turns the capability off.
MAX_SUBAGENT_CALLS_RANGE = (0, 64)
MAX_ACTORS_RANGE = (0, 16)
# The session-wide settings entry (plugin_settings["framework"]).
FRAMEWORK = "framework"
CHARACTER_ACTOR = "character-actor@1"
# The text a caller reads for an internal failure; the real reason goes to the server log.
INTERNAL_FAILURE = "the subagent did not produce a valid answer"

RunProvider = Callable[["SubagentPlan"], Awaitable[dict[str, Any]]]


def subagent_error(code: str, message: str, stop_reason: str = "") -> dict[str, Any]:
    result: dict[str, Any] = {"ok": False, "error": {"code": code, "message": message}}
    if stop_reason:
        result["stopReason"] = stop_reason
    return result


@dataclass
class SubagentPlan:
    """An admitted call: the provider to run and what it is told."""

    provider: Runtime
    manifest: CompiledManifest
    brief: str
    budget: dict[str, Any]
    call_id: str
    timeout_s: float


def subagent_limits(plugin_settings: Mapping[str, Mapping[str, Any]], caller_plugin_id: str) -> tuple[int, int]:
    """(maxSubagentCalls, maxActors) of a root execution: the session's settings, read when it starts.

    The caller plugin's panel value wins over the session-wide `framework` one; a value that is
    not an integer in range is ignored (the default applies)."""

    def setting(key: str, default: int, bounds: tuple[int, int]) -> int:
        for owner in (caller_plugin_id, FRAMEWORK):
            value = (plugin_settings.get(owner) or {}).get(key)
            if isinstance(value, float) and value.is_integer():
                value = int(value)  # a protobuf Struct holds numbers as floats
            if isinstance(value, int) and not isinstance(value, bool) and bounds[0] <= value <= bounds[1]:
                return value
        return default

    return (setting("maxSubagentCalls", DEFAULT_MAX_SUBAGENT_CALLS, MAX_SUBAGENT_CALLS_RANGE),
            setting("maxActors", DEFAULT_MAX_ACTORS, MAX_ACTORS_RANGE))


@dataclass
class SubagentBudget:
    """The limits of one root execution (shared by its nested calls)."""

    max_calls: int = DEFAULT_MAX_SUBAGENT_CALLS
    max_actors: int = DEFAULT_MAX_ACTORS
    calls: int = 0
    actors: set[str] = field(default_factory=set)
    running: int = 0

    def saved(self) -> dict[str, Any]:
        """What a suspended run keeps of it: its limits, the calls it admitted and the characters (spec: 执行名额)."""
        return {"limits": {"maxSubagentCalls": self.max_calls, "maxActors": self.max_actors}, "calls": self.calls,
                "actorIds": sorted(self.actors)}

    @classmethod
    def restored(cls, saved: Any) -> SubagentBudget | None:
        """The budget a resumed run goes on with (None when the suspension kept none: a new one is made)."""
        if not isinstance(saved, dict) or not isinstance(saved.get("limits"), dict):
            return None
        limits = saved["limits"]
        return cls(max_calls=int(limits.get("maxSubagentCalls", DEFAULT_MAX_SUBAGENT_CALLS)),
                   max_actors=int(limits.get("maxActors", DEFAULT_MAX_ACTORS)), calls=int(saved.get("calls") or 0),
                   actors={str(actor) for actor in saved.get("actorIds") or []})


class Subagents:
    """`run(request)` for one root execution; `providers` are the session's runtimes with their manifests."""

    def __init__(
        self,
        *,
        caller_plugin_id: str,
        caller_runtime_id: str,
        providers: list[tuple[Runtime, CompiledManifest]],
        run_provider: RunProvider,
        characters: Callable[[], Awaitable[list[dict[str, Any]]]],
        remaining_s: Callable[[], float],
        is_paused: Callable[[str], bool | Awaitable[bool]] = lambda plugin_id: False,
        budget: SubagentBudget | None = None,
        history: Callable[[], list[Any]] = list,
    ) -> None:
        self._caller_plugin_id = caller_plugin_id
        self._caller_runtime_id = caller_runtime_id
        self._providers = [(runtime, manifest) for runtime, manifest in providers
                           if manifest.schedule.subagent_only and runtime.type == RuntimeType.AGENT]
        self._run_provider = run_provider
        self._characters = characters
        # The session's log as the turn read it: a character's witnessed story comes from it.
        self._history = history
        self._remaining_s = remaining_s
        self._is_paused = is_paused
        self.budget = budget or SubagentBudget()
        self._tasks: set[asyncio.Task] = set()
        self.closed = False
        # Write-service changes of successful subagents: they commit with the delegating run.
        self.writes: list[dict[str, Any]] = []
        # Trace entries of the subagent runs, recorded with the delegating run's.
        self.trace: list[Any] = []

    @property
    def available(self) -> bool:
        return bool(self._providers)

    def targets(self) -> list[str]:
        """What delegate can name: contracts of providers and same-package runtime ids."""
        named = []
        for runtime, manifest in self._providers:
            contract = manifest.io.output.contract
            if contract:
                named.append(f"contract:{contract}")
            if runtime.plugin_id == self._caller_plugin_id:
                named.append(f"runtimeId:{runtime.runtime_id}")
        return named

    async def run(self, request: Any) -> dict[str, Any]:
        if self.closed:
            raise RuntimeError("ctx.agents.run was called after the handler finished")
        plan_or_error = await self._admit(request)
        if isinstance(plan_or_error, dict):
            return plan_or_error
        plan = plan_or_error
        self.budget.running += 1
        task = asyncio.ensure_future(self._run_provider(plan))
        self._tasks.add(task)
        try:
            return await asyncio.wait_for(asyncio.shield(task), plan.timeout_s)
        except TimeoutError:
            task.cancel()
            return subagent_error("timeout", f"the subagent {plan.provider.runtime_id} used its time ({plan.timeout_s:.1f} s)", "timeout")
        except asyncio.CancelledError:
            task.cancel()
            raise
        except Exception as error:  # a kernel or peer failure inside the subagent
            log.warning("subagent failed", provider=plan.provider.runtime_id, call_id=plan.call_id, reason=repr(error))
            return subagent_error("internal", INTERNAL_FAILURE, StopReason.ERROR)
        finally:
            self.budget.running -= 1
            self._tasks.discard(task)

    async def close(self) -> None:
        """The caller finished: subagents it did not wait for are awaited, then no more calls."""
        self.closed = True
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _admit(self, request: Any) -> SubagentPlan | dict[str, Any]:  # noqa: C901 -- one admission check per spec limit, in the spec's order; issue 17 splits it
        """Validate, resolve the provider and the character, then take the budget (in that order)."""
        if not isinstance(request, dict):
            return subagent_error("invalid-input", "the request is an object {target, brief, data?, budget?}")
        target = request.get("target")
        brief = request.get("brief")
        if not isinstance(target, dict) or len([k for k in ("contract", "runtimeId") if target.get(k)]) != 1:
            return subagent_error("invalid-input", "target is {contract} or {runtimeId}, exactly one of them")
        if not isinstance(brief, str) or not brief.strip():
            return subagent_error("invalid-input", "brief is required: the subagent's task in 1 to 20000 characters")
        if len(brief) > MAX_BRIEF_CHARS:
            return subagent_error("invalid-input", f"brief has {len(brief)} characters; at most {MAX_BRIEF_CHARS}")
        budget = request.get("budget") or {}
        if not isinstance(budget, dict) or any(
                key not in ("maxSteps", "timeoutMs") or not isinstance(value, int) or isinstance(value, bool) or value <= 0
                for key, value in budget.items()):
            return subagent_error("invalid-input", "budget is {maxSteps?, timeoutMs?} with positive integers")
        found = self._resolve(target)
        if isinstance(found, dict):
            return found
        provider, manifest = found
        contract = manifest.io.output.contract
        character_id = request.get("characterId")
        data = request.get("data")
        text = brief
        if contract == CHARACTER_ACTOR:
            if data is not None:
                return subagent_error("invalid-input", "a character request takes characterId and instruction, not data")
            character = await self._character(character_id)
            if isinstance(character, str):
                return subagent_error("invalid-input", character)
            assembled = character_brief(character, witnessed_story(self._history(), character["id"]), brief, request.get("instruction"))
            if assembled is None:
                return subagent_error("invalid-input", f"the brief and instruction with the character's name exceed {MAX_ASSEMBLED_CHARS} characters")
            text = assembled
        else:
            if character_id is not None or request.get("instruction") is not None:
                return subagent_error("invalid-input", "characterId and instruction are only for character-actor@1 requests")
            if data is not None:
                if not isinstance(data, dict):
                    return subagent_error("invalid-input", "data must be a JSON object")
                try:
                    encoded = json.dumps(data, ensure_ascii=False)
                except (TypeError, ValueError) as error:
                    return subagent_error("invalid-input", f"data is not JSON: {error}")
                if len(encoded.encode()) > MAX_DATA_BYTES:
                    return subagent_error("invalid-input", f"data is {len(encoded.encode())} bytes as JSON; at most {MAX_DATA_BYTES}")
                text = f"{brief}\n\n<data>\n{encoded}\n</data>"
        paused = self._is_paused(provider.plugin_id)
        if inspect.isawaitable(paused):
            paused = await paused
        if paused:
            return subagent_error("unavailable", f"{provider.runtime_id} is paused in this session after repeated faults")
        # Admission: the limits are taken synchronously, after everything above passed.
        if self.budget.running >= MAX_CONCURRENT:
            return subagent_error("unavailable", f"{MAX_CONCURRENT} subagents are already running in this execution")
        if self.budget.calls >= self.budget.max_calls:
            return subagent_error("unavailable", f"this execution used its {self.budget.max_calls} subagent calls (maxSubagentCalls)")
        if isinstance(character_id, str) and character_id not in self.budget.actors:
            if len(self.budget.actors) >= self.budget.max_actors:
                return subagent_error("unavailable", f"this execution already delegated to {self.budget.max_actors} characters (maxActors)")
            self.budget.actors.add(character_id)
        self.budget.calls += 1
        own_timeout = manifest.agent_part.loop.timeout_ms
        wanted = min(own_timeout, budget.get("timeoutMs", own_timeout))
        timeout_s = max(0.0, min(wanted / 1000, self._remaining_s()))
        return SubagentPlan(provider, manifest, text, dict(budget), new_id(), timeout_s)

    def _resolve(self, target: dict[str, Any]) -> tuple[Runtime, CompiledManifest] | dict[str, Any]:
        if target.get("contract"):
            matches = [(r, m) for r, m in self._providers if m.io.output.contract == target["contract"]]
            if not matches:
                return subagent_error("not-found", f"no active subagentOnly provider of {target['contract']}")
            if len(matches) > 1:
                return subagent_error("ambiguous", f"{len(matches)} active providers offer {target['contract']}: "
                                      + ", ".join(sorted(r.runtime_id for r, _ in matches)))
            return matches[0]
        wanted = target["runtimeId"]
        for runtime, manifest in self._providers:
            if runtime.runtime_id == wanted:
                if runtime.plugin_id != self._caller_plugin_id:
                    return subagent_error("not-found", f"{wanted} is not in the caller's package {self._caller_plugin_id}; "
                                          "target another package's provider by its contract")
                return runtime, manifest
        return subagent_error("not-found", f"no active subagentOnly runtime {wanted} in {self._caller_plugin_id}")

    async def _character(self, character_id: Any) -> dict[str, Any] | str:
        if not isinstance(character_id, str) or not character_id:
            return "characterId is required for a character-actor@1 request"
        for character in await self._characters():
            if character.get("id") == character_id:
                return character
        return f"no character {character_id} in this session's world"

