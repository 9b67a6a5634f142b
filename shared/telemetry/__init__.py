"""Tracing (OpenTelemetry) and metrics (Prometheus) of the services; both off by default."""
