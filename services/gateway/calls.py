"""One logical call: resolve the slot, then try its models in order within one budget.

Retryable failures (connect errors, timeouts before output, 429, 5xx) are retried with
jittered exponential backoff, honouring Retry-After unless it would pass the budget. Each
model but the last gets `attempts_per_model` attempts before the next fallback is tried;
fallbacks only happen before any output reached the caller. Output that breaks off ends
with a Final "interrupted" rather than an error.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace

import grpc

from services.gateway import events
from services.gateway.budget import Budget, backoff_delay, first_token_wait
from services.gateway.chat import Call, Message
from services.gateway.events import Event, Final
from services.gateway.providers.base import AttemptFailed, AttemptLimits, Provider
from services.gateway.settings import GatewaySettings
from services.gateway.slots import SlotTable, Target
from shared.errors import ServiceError
from shared.logs import get_logger

log = get_logger(component="gateway.calls")


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

    def _limits(self, call: Call, budget: Budget) -> AttemptLimits:
        s = self.settings
        remaining = budget.remaining_s
        call_timeout = (call.call_timeout_ms or s.gateway_call_timeout_ms) / 1000
        first_token_ms = call.first_token_timeout_ms or s.gateway_first_token_timeout_ms
        first_token = first_token_ms / 1000 if first_token_ms else first_token_wait(remaining, budget.attempts_left + 1)
        idle = (call.idle_timeout_ms or s.gateway_idle_timeout_ms) / 1000
        return AttemptLimits(
            call_timeout_s=max(0.001, min(call_timeout, remaining)),
            first_token_timeout_s=max(0.001, min(first_token, remaining)),
            idle_timeout_s=max(0.001, idle),
            connect_timeout_s=max(0.001, min(s.gateway_connect_timeout_ms / 1000, remaining)),
        )

    async def run(self, call: Call, *, stream: bool, caller_remaining_s: float | None = None) -> AsyncIterator[Event]:
        resolution = self.slots.resolve(call.slot, call.model_override)
        s = self.settings
        budget = Budget.start(s.gateway_max_attempts, s.gateway_call_budget_s, caller_remaining_s)
        last_failure: AttemptFailed | None = None
        tried: list[str] = []
        chain = resolution.chain
        for position, target in enumerate(chain):
            is_last = position == len(chain) - 1
            provider = self.providers[target.provider.kind]
            tried.append(target.label)
            retry_index = 0
            while not budget.exhausted() and (is_last or retry_index < s.gateway_attempts_per_model):
                budget.take_attempt()
                limits = self._limits(call, budget)
                emitted = False
                try:
                    async for event in provider.attempt(call, target, slot=resolution.slot, stream=stream, limits=limits):
                        if isinstance(event, Final):
                            yield replace(event, provider=target.provider.name, model=target.model, attempts=budget.used)
                            return
                        emitted = True
                        yield event
                    raise AttemptFailed("the provider ended without a final reply", retryable=True)
                except AttemptFailed as failure:
                    if emitted:
                        # Providers report breaks after output as a Final; this is a last resort.
                        yield _interrupted(target, budget, str(failure))
                        return
                    log.warning(
                        "gateway.attempt_failed",
                        target=target.label,
                        attempt=budget.used,
                        status=failure.status,
                        retryable=failure.retryable,
                        reason=failure.reason,
                    )
                    if not failure.retryable:
                        raise ServiceError(failure.code, f"{target.label}: {failure.reason}") from None
                    last_failure = failure
                retry_index += 1
                if not is_last and retry_index >= s.gateway_attempts_per_model:
                    break
                wait = backoff_delay(retry_index - 1, s.gateway_retry_base_ms / 1000, s.gateway_retry_max_ms / 1000, self.rng)
                if last_failure.retry_after_s is not None:
                    wait = last_failure.retry_after_s
                if budget.attempts_left == 0 or wait >= budget.remaining_s:
                    # Waiting would pass the budget: try the next model now, or give up.
                    break
                await asyncio.sleep(wait)
        reason = str(last_failure) if last_failure else "the call budget was used up"
        raise ServiceError(
            grpc.StatusCode.UNAVAILABLE,
            f"no model answered slot {resolution.slot!r} after {budget.used} attempt(s) "
            f"(tried {', '.join(tried)}): {reason}",
        )

    async def run_to_final(self, call: Call, *, caller_remaining_s: float | None = None) -> Final:
        async for event in self.run(call, stream=False, caller_remaining_s=caller_remaining_s):
            if isinstance(event, Final):
                return event
        raise ServiceError(grpc.StatusCode.INTERNAL, "the call ended without a final reply")


def _interrupted(target: Target, budget: Budget, reason: str) -> Final:
    return Final(
        message=Message(role="assistant"),
        finish_reason=events.INTERRUPTED,
        error_message=reason,
        provider=target.provider.name,
        model=target.model,
        attempts=budget.used,
    )

