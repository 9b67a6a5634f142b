"""The gateway's settings (environment variables with the COVEL_ prefix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from shared.settings import ServiceSettings


class GatewaySettings(ServiceSettings):
    # YAML file with `providers:` and `slots:` (see services/gateway/slots.py).
    gateway_config: Path | None = None
    # Per-slot overrides as JSON, e.g. '{"story": "openai:gpt-4o", "fast": "scripted"}'.
    gateway_slots: dict[str, str] = Field(default_factory=dict)

    # Shortcut for one OpenAI-compatible provider named "openai". Setting the model makes it
    # the default slot; the key is read from the env var named here or from a secret file.
    gateway_openai_base_url: str | None = None
    gateway_openai_model: str | None = None
    gateway_openai_api_key_env: str = "OPENAI_API_KEY"
    gateway_openai_api_key_file: Path | None = None
    # An embedding model of that provider: the slot "embedding" (memory-search's vectors).
    gateway_openai_embedding_model: str | None = None
    # How that provider's models think (services/gateway/thinking.py): "", "always" or "switchable", and what a call
    # with agent.reasoning: false adds to its request (switchable; default {"reasoning_effort": "minimal"}).
    gateway_openai_thinking: str = ""
    gateway_openai_thinking_off: dict[str, Any] | None = None
    # That provider's models' context window in tokens (0: not known): a larger request is not sent.
    gateway_openai_context_window: int = Field(default=0, ge=0)

    # Scripted (offline) provider.
    gateway_script: Path | None = None
    gateway_scripted_chunk_delay_ms: int = 0

    # Budget of one logical call, shared by retries and fallbacks.
    gateway_max_attempts: int = 8
    gateway_call_budget_s: float = 120.0
    # maxRetries when the request leaves it unset (the spec's default for non-story runtimes).
    gateway_max_retries: int = 3
    # 429/5xx answers one model gets before the next fallback is tried (the last model gets the rest).
    gateway_attempts_per_model: int = 3
    gateway_retry_base_ms: int = 500
    gateway_retry_max_ms: int = 8000

    # Per-attempt limits when the request leaves them 0.
    gateway_call_timeout_ms: int = 120_000
    # 0: derived from the budget (spec: 流式调用的等待时限).
    gateway_first_token_timeout_ms: int = 0
    gateway_idle_timeout_ms: int = 120_000
    gateway_connect_timeout_ms: int = 10_000
