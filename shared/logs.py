"""Structured logs (structlog): JSON lines in clusters, readable lines on a terminal; with the
session and turn ids bound in a turn's task and the trace id while tracing is on."""

from __future__ import annotations

import logging
import sys

import structlog

from shared.telemetry.tracing import ids_of_current_span


def add_trace_ids(logger, method: str, event_dict: dict) -> dict:
    """trace_id and span_id of the current span while tracing is on, to find a log line's trace."""
    ids = ids_of_current_span()
    if ids is not None:
        event_dict.setdefault("trace_id", ids[0])
        event_dict.setdefault("span_id", ids[1])
    return event_dict


def configure_logging(service: str, level: str = "info", fmt: str = "json") -> structlog.stdlib.BoundLogger:
    renderer: structlog.types.Processor
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            # session_id and turn_id come bound from the turn's task (services/scheduler).
            structlog.contextvars.merge_contextvars,
            add_trace_ids,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.bind_contextvars(service=service)
    return structlog.get_logger()


def get_logger(**bound: object) -> structlog.stdlib.BoundLogger:
    # A lazy proxy: module-level loggers are made at import, before configure_logging; binding
    # eagerly would freeze structlog's default (console, unfiltered) configuration into them.
    return structlog.get_logger(**bound)
