"""Embedding calls: which model a slot embeds with, and one logical call with retries and fallbacks.

An embedding slot is configured like a chat slot (YAML `slots.embedding`, COVEL_GATEWAY_SLOTS,
COVEL_GATEWAY_OPENAI_EMBEDDING_MODEL) but never falls back to the default chat slot: a chat model
cannot embed. Only when the default slot is the scripted model does an unlisted embedding slot
use the scripted embedder, so the offline setup searches with vectors too.

The call follows calls.py's rules, shorter because nothing streams: one budget of attempts and
time (never past the gRPC deadline); connect errors, 429 and 5xx retried with backoff
(Retry-After honoured), the next fallback model after `attempts_per_model` refusals; other 4xx
not retried; given up: RESOURCE_EXHAUSTED (DEADLINE_EXCEEDED when the model never answered).
"""

from __future__ import annotations

import asyncio
import math
from typing import Protocol

import grpc

from services.gateway.budget import backoff_delay
from services.gateway.calls import CallFailed, CallRunner
from services.gateway.chat import EmbedCall, Embedded
from services.gateway.providers.base import STALL, AttemptFailed
from services.gateway.slots import DEFAULT_SLOT, EMBEDDING_SLOT, SCRIPTED, Resolution, SlotTable, Target
from shared.errors import failed_precondition
from shared.logs import get_logger

log = get_logger(component="gateway.embeddings")


class Embedder(Protocol):
    async def embed(self, inputs: tuple[str, ...], target: Target, *, timeout_s: float, connect_timeout_s: float) -> Embedded:
        """Vectors for the inputs, or AttemptFailed."""
        ...


def resolve_embedding(slots: SlotTable, slot: str) -> Resolution:
    """The models an embedding slot tries, in order; FAILED_PRECONDITION when none is configured."""
    name = slot.strip() or EMBEDDING_SLOT
    if name in slots.slots:
        return slots.resolve(name)
    default = slots.slots.get(DEFAULT_SLOT)
    if default is not None and default.provider == SCRIPTED:
        return Resolution(name, (Target(slots.providers[SCRIPTED], SCRIPTED),))
    raise failed_precondition(
        f"no embedding model is configured for slot {name!r} (a chat model cannot embed): add slots.{name} "
        f"(provider:model of an embedding model) to the YAML file named by COVEL_GATEWAY_CONFIG, set "
        f"COVEL_GATEWAY_SLOTS='{{\"{name}\": \"provider:model\"}}' or COVEL_GATEWAY_OPENAI_EMBEDDING_MODEL",
        reason="MODEL_NOT_CONFIGURED", subject=f"slots/{name}",
    )


def normalised(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


async def run_embed(runner: CallRunner, call: EmbedCall, *, caller_remaining_s: float | None = None) -> Embedded:
    resolution = resolve_embedding(runner.slots, call.slot)
    s = runner.settings
    seconds = call.timeout_ms / 1000 if call.timeout_ms else s.gateway_call_budget_s
    budget = runner.budget_for_seconds(seconds, caller_remaining_s)
    chain, position, failures_here = resolution.chain, 0, 0
    last: AttemptFailed | None = None
    while not budget.exhausted():
        target = chain[position]
        embedder: Embedder = runner.providers[target.provider.kind]  # type: ignore[assignment]
        budget.take_attempt()
        timeout_s = max(0.001, min(s.gateway_call_timeout_ms / 1000, budget.remaining_s))
        try:
            done = await embedder.embed(call.inputs, target, timeout_s=timeout_s,
                                        connect_timeout_s=min(s.gateway_connect_timeout_ms / 1000, timeout_s))
            # A provider may name its model more exactly (the scripted embedder's version).
            return Embedded([normalised(v) for v in done.vectors], done.usage, target.provider.name, done.model or target.model,
                            budget.used)
        except AttemptFailed as failure:
            log.warning("gateway.embed_attempt_failed", target=target.label, attempt=budget.used, status=failure.status,
                        retryable=failure.retryable, reason=failure.reason)
            if not failure.retryable:
                raise CallFailed(failure.code, f"{target.label}: {failure.reason}", attempts=budget.used,
                                 provider=target.provider.name) from None
            last, failures_here = failure, failures_here + 1
        wait = last.retry_after_s if last.retry_after_s is not None else backoff_delay(
            failures_here - 1, s.gateway_retry_base_ms / 1000, s.gateway_retry_max_ms / 1000, runner.rng)
        if last.allows_fallback and position + 1 < len(chain) and (
                failures_here >= s.gateway_attempts_per_model or wait >= budget.remaining_s):
            position, failures_here = position + 1, 0
            continue
        if budget.attempts_left == 0 or wait >= budget.remaining_s:
            break
        await asyncio.sleep(wait)
    code = grpc.StatusCode.DEADLINE_EXCEEDED if last is not None and last.kind == STALL else grpc.StatusCode.RESOURCE_EXHAUSTED
    why = str(last) if last else "the call budget was used up"
    raise CallFailed(code, f"no model embedded for slot {resolution.slot!r} after {budget.used} attempt(s): {why}",
                     attempts=budget.used, provider=chain[position].provider.name)
