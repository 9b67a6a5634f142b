"""One logical call: resolve the slot, then try its models in order within one budget.

The rules (spec: agent.loop timeouts and retries, 流式调用的等待时限; issue 6):

- Budget: `max_attempts` HTTP attempts (default 8) and the runtime's timeoutMs (default the
  gateway's 120 s), shared by every retry and fallback, never past the gRPC deadline. Time
  while a stream produces output is credited back (`Budget.credit_streaming`).
- Transport failures (connect errors, a break before output, 429, 5xx) are retried with
  jittered exponential backoff; Retry-After is honoured unless it would pass the budget.
- Stalls (no first output within the first-token wait, no reply within callTimeoutMs) and
  generation errors before output are retried at once and use up maxRetries. Unless the
  caller fixed firstTokenTimeoutMs, each streamed attempt waits per the spec's formula from
  the time left and the attempts maxRetries still allows.
- Fallback: the next model only after 429/5xx (after `attempts_per_model` of them, or at once
  when Retry-After would pass the budget), and only before any output reached the caller.
- Other 4xx: no retry. Output that breaks off ends with a Final "interrupted"; a generation
  error after output with a Final "error"; the caller decides what to do with those.
- Given up: RESOURCE_EXHAUSTED (DEADLINE_EXCEEDED after stalls) with the attempts used, never
  UNAVAILABLE, so no channel re-sends the call with a fresh budget (issue 16).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace

import grpc

from services.gateway import context_window, events
from services.gateway.budget import Budget, backoff_delay, first_token_wait
from services.gateway.chat import Call, Message
from services.gateway.events import Event, Final
from services.gateway.providers.base import GENERATION, STALL, AttemptFailed, AttemptLimits, Provider
from services.gateway.settings import GatewaySettings
from services.gateway.slots import Resolution, SlotTable, Target
from shared.errors import ServiceError
from shared.logs import get_logger

log = get_logger(component="gateway.calls")


@dataclass
class CallFailed(ServiceError):
    """No model answered: the status for the caller, and what the call used (for metrics and logs)."""

    attempts: int = 0
    provider: str = ""


@dataclass
class _Rounds:
    """Attempts that got no reply (stalls, generation errors): maxRetries + 1 of them."""

    allowed: int
    used: int = 0

    @property
    def left(self) -> int:
        return max(0, self.allowed - self.used)


class CallRunner:
    def __init__(
        self,
        settings: GatewaySettings,
        slots: SlotTable,
        providers: Mapping[str, Provider],
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.slots = slots
        # By provider kind ("scripted", "openai-compatible").
        self.providers = providers
        self.rng = rng or random.Random()

    def limits(self, call: Call, budget: Budget, rounds: _Rounds) -> AttemptLimits:
        s = self.settings
        remaining = budget.remaining_s
        call_timeout = (call.call_timeout_ms or s.gateway_call_timeout_ms) / 1000
        first_token_ms = call.first_token_timeout_ms or s.gateway_first_token_timeout_ms
        first_token = first_token_ms / 1000 if first_token_ms else first_token_wait(remaining, rounds.left)
        idle = (call.idle_timeout_ms or s.gateway_idle_timeout_ms) / 1000
        return AttemptLimits(
            call_timeout_s=max(0.001, min(call_timeout, remaining)),
            first_token_timeout_s=max(0.001, min(first_token, remaining)),
            idle_timeout_s=max(0.001, idle),
            connect_timeout_s=max(0.001, min(s.gateway_connect_timeout_ms / 1000, remaining)),
            time_left_s=lambda: budget.remaining_s,
        )

    def budget_for(self, call: Call, caller_remaining_s: float | None) -> Budget:
        seconds = call.timeout_ms / 1000 if call.timeout_ms else self.settings.gateway_call_budget_s
        return self.budget_for_seconds(seconds, caller_remaining_s)

    def budget_for_seconds(self, seconds: float, caller_remaining_s: float | None) -> Budget:
        return Budget.start(self.settings.gateway_max_attempts, seconds, caller_remaining_s)

    async def run(self, call: Call, *, stream: bool, caller_remaining_s: float | None = None) -> AsyncIterator[Event]:
        resolution = self.slots.resolve(call.slot, call.model_override)
        tokens = context_window.call_tokens(call)
        chain = context_window.fitting(resolution.chain, tokens)
        if not chain:
            # No model's context window holds the request: none is asked.
            yield context_window.overflow(resolution.chain, tokens)
            return
        async for event in self._run(call, replace(resolution, chain=chain), tokens, stream=stream, caller_remaining_s=caller_remaining_s):
            yield event

    async def _run(self, call: Call, resolution: Resolution, tokens: int, *, stream: bool,
                   caller_remaining_s: float | None) -> AsyncIterator[Event]:
        """The models that fit the request, in order, within one budget."""
        s = self.settings
        budget = self.budget_for(call, caller_remaining_s)
        max_retries = s.gateway_max_retries if call.max_retries is None else call.max_retries
        rounds = _Rounds(allowed=max_retries + 1)
        chain = resolution.chain
        position = 0
        failures_here = 0  # transport failures on the current model (backoff exponent)
        refusals_here = 0  # 429/5xx on the current model (fallback trigger)
        last_failure: AttemptFailed | None = None
        tried: list[str] = []
        while not budget.exhausted() and rounds.left > 0:
            target = chain[position]
            if not tried or tried[-1] != target.label:
                tried.append(target.label)
            provider = self.providers[target.provider.kind]
            budget.take_attempt()
            limits = self.limits(call, budget, rounds)
            last_output: float | None = None
            try:
                async for event in provider.attempt(call, target, slot=resolution.slot, stream=stream, limits=limits):
                    now = time.monotonic()
                    if last_output is not None:
                        # The stream was producing output: this time is not the runtime's.
                        budget.credit_streaming(now - last_output)
                    if isinstance(event, Final):
                        yield self._finished(event, target, budget)
                        return
                    last_output = now
                    yield event
                raise AttemptFailed("the provider ended without a final reply", retryable=True)
            except AttemptFailed as failure:
                if last_output is not None:
                    # Providers report breaks after output as a Final; this is a last resort.
                    yield self._finished(_interrupted(str(failure)), target, budget)
                    return
                log.warning(
                    "gateway.attempt_failed",
                    target=target.label,
                    attempt=budget.used,
                    kind=failure.kind,
                    status=failure.status,
                    retryable=failure.retryable,
                    reason=failure.reason,
                )
                if not failure.retryable:
                    yield self._refused(failure, target, budget, tokens)
                    return
                last_failure = failure
            if last_failure.kind in (STALL, GENERATION):
                # No reply: retried at once (spec: 重试之间没有等待), within maxRetries.
                rounds.used += 1
                continue
            failures_here += 1
            wait = backoff_delay(failures_here - 1, s.gateway_retry_base_ms / 1000, s.gateway_retry_max_ms / 1000, self.rng)
            if last_failure.retry_after_s is not None:
                wait = last_failure.retry_after_s
            if last_failure.allows_fallback:
                refusals_here += 1
                has_next = position + 1 < len(chain)
                if has_next and (refusals_here >= s.gateway_attempts_per_model or wait >= budget.remaining_s):
                    position, failures_here, refusals_here = position + 1, 0, 0
                    continue
            if budget.attempts_left == 0 or wait >= budget.remaining_s:
                break
            await asyncio.sleep(wait)
        if last_failure is not None and last_failure.kind == GENERATION:
            # The provider kept failing to generate: surfaced as such, not as an outage.
            yield self._finished(Final(message=Message(role="assistant"), finish_reason=events.ERROR, error_message=str(last_failure)), chain[position], budget)
            return
        raise self._gave_up(resolution.slot, budget, rounds, tried, last_failure, chain[position].provider.name)

    def _refused(self, failure: AttemptFailed, target: Target, budget: Budget, tokens: int) -> Final:
        """A failure not worth retrying: a request too long for the model ends the call with an overflow Final;
        anything else is the caller's error (CallFailed)."""
        if context_window.refused_as_too_long(failure.status, failure.reason):
            return self._finished(context_window.provider_overflow(target, tokens, failure.reason), target, budget)
        raise CallFailed(failure.code, f"{target.label}: {failure.reason}", attempts=budget.used, provider=target.provider.name) from None

    def _finished(self, final: Final, target: Target, budget: Budget) -> Final:
        return replace(
            final,
            provider=target.provider.name,
            model=target.model,
            attempts=budget.used,
            streamed_ms=int(budget.streamed_s * 1000),
            context_window=target.window,
        )

    @staticmethod
    def _gave_up(slot: str, budget: Budget, rounds: _Rounds, tried: list[str], failure: AttemptFailed | None,
                 provider: str) -> CallFailed:
        why = str(failure) if failure else "the call budget was used up"
        if rounds.left == 0:
            limit = f"maxRetries allowed {rounds.allowed} attempt(s) without a reply"
        elif budget.attempts_left == 0:
            limit = f"the request budget of {budget.max_attempts} HTTP attempts is used up"
        else:
            limit = "the call's time is used up"
        # Not UNAVAILABLE, which invites a re-send with a fresh budget: the budget is spent, so this
        # call must not be repeated as is (a stall: the model took the request and never answered).
        code = grpc.StatusCode.DEADLINE_EXCEEDED if failure is not None and failure.kind == STALL else grpc.StatusCode.RESOURCE_EXHAUSTED
        return CallFailed(
            code,
            f"no model answered slot {slot!r} after {budget.used} attempt(s) (tried {', '.join(tried)}; {limit}): {why}",
            attempts=budget.used,
            provider=provider,
        )

    async def run_to_final(self, call: Call, *, caller_remaining_s: float | None = None) -> Final:
        async for event in self.run(call, stream=False, caller_remaining_s=caller_remaining_s):
            if isinstance(event, Final):
                return event
        raise ServiceError(grpc.StatusCode.INTERNAL, "the call ended without a final reply")


def _interrupted(reason: str) -> Final:
    return Final(message=Message(role="assistant"), finish_reason=events.INTERRUPTED, error_message=reason)
