"""Libraries that log through the standard library (grpc, SQLAlchemy, httpx, alembic) write the
same JSON lines as the services, with the service name and the logger's name."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from shared.settings import REPO_ROOT


def test_stdlib_records_are_json_lines_with_the_service_and_logger() -> None:
    program = textwrap.dedent("""
        import logging
        from shared.logs import configure_logging
        configure_logging("store", level="info")
        logging.getLogger("sqlalchemy.engine").warning("pool %s exhausted", "main")
        try:
            raise KeyError("lease")
        except KeyError:
            logging.getLogger("grpc._cython").exception("callback failed")
        logging.getLogger("httpx").info("HTTP Request: GET http://x")  # below httpx's floor: not written
    """)
    result = subprocess.run([sys.executable, "-c", program], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True)
    entries = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["event"], e["level"], e["logger"], e["service"]) for e in entries] == [
        ("pool main exhausted", "warning", "sqlalchemy.engine", "store"),
        ("callback failed", "error", "grpc._cython", "store"),
    ]
    assert "KeyError: 'lease'" in entries[1]["exception"] and entries[0]["timestamp"].endswith("Z")


def test_the_level_setting_filters_stdlib_records_too() -> None:
    program = textwrap.dedent("""
        import logging
        from shared.logs import configure_logging
        configure_logging("gateway", level="warning")
        logging.getLogger("sqlalchemy.engine").info("not written")
        logging.getLogger("sqlalchemy.engine").warning("written")
    """)
    result = subprocess.run([sys.executable, "-c", program], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert [json.loads(line)["event"] for line in result.stdout.splitlines()] == ["written"]
