"""Settings of the web front (COVEL_ environment variables)."""

from __future__ import annotations

from shared.settings import ServiceSettings

DEFAULT_WEB_ADDR = "127.0.0.1:8080"


class WebSettings(ServiceSettings):
    # Where the page and the HTTP/JSON API listen (host:port).
    web_addr: str = DEFAULT_WEB_ADDR
    # How long a unary call to the scheduler may take before the API answers 504.
    web_call_timeout_s: float = 30.0
    # Where /metrics listens (else COVEL_METRICS_PORT); none: no metrics.
    web_metrics_port: int | None = None
