"""Structured logs (structlog): JSON lines in clusters, readable lines on a terminal; with the
session and turn ids bound in a turn's task and the trace id while tracing is on.

They go to stdout, which carries nothing else; stderr is for the rest (the READY line, console
trace spans, a crash's traceback), so a log file stays JSON lines."""

from __future__ import annotations

import logging
import sys

import structlog

from shared.telemetry.tracing import ids_of_current_span


def add_trace_ids(logger: structlog.types.WrappedLogger, method: str, event_dict: structlog.types.EventDict) -> structlog.types.EventDict:
    """trace_id and span_id of the current span while tracing is on, to find a log line's trace."""
    ids = ids_of_current_span()
    if ids is not None:
        event_dict.setdefault("trace_id", ids[0])
        event_dict.setdefault("span_id", ids[1])
    return event_dict


# Libraries that log through the standard library (grpc, SQLAlchemy, httpx, alembic, asyncio):
# their records go through the same processors and renderer, so a log file stays one format.
QUIET_LIBRARIES = {"httpx": logging.WARNING, "httpcore": logging.WARNING, "alembic": logging.WARNING}


def _shared_processors() -> list[structlog.types.Processor]:
    return [
        # session_id and turn_id come bound from the turn's task (services/scheduler).
        structlog.contextvars.merge_contextvars,
        add_trace_ids,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def _bridge_stdlib_logging(renderer: structlog.types.Processor, level: str) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_shared_processors(), structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, structlog.processors.format_exc_info, renderer],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.getLevelName(level.upper()))
    for name, quietest in QUIET_LIBRARIES.items():
        logging.getLogger(name).setLevel(max(quietest, root.level))


def configure_logging(service: str, level: str = "info", fmt: str = "json") -> structlog.stdlib.BoundLogger:
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer(colors=False) if fmt == "console" else structlog.processors.JSONRenderer()
    )
    _bridge_stdlib_logging(renderer, level)
    structlog.configure(
        processors=[
            *_shared_processors(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.bind_contextvars(service=service)
    return structlog.get_logger()


def get_logger(**bound: object) -> structlog.stdlib.BoundLogger:
    # A lazy proxy: module-level loggers are made at import, before configure_logging; binding
    # eagerly would freeze structlog's default (console, unfiltered) configuration into them.
    return structlog.get_logger(**bound)
