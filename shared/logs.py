"""Structured logs (structlog): JSON lines in clusters, readable lines on a terminal."""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(service: str, level: str = "info", fmt: str = "json") -> structlog.stdlib.BoundLogger:
    renderer: structlog.types.Processor
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
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
    return structlog.get_logger().bind(**bound)
