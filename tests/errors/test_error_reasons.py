"""Every error the services answer carries ErrorInfo with a stable reason: one of shared/error_reasons.py's, or
its status code's name; docs/api.md's table is that table."""

from __future__ import annotations

import ast
import re

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from shared.error_reasons import ERROR_DOMAIN, REASONS, default_reason
from shared.errors import ServiceError, invalid_argument
from shared.settings import REPO_ROOT

UPPER_SNAKE = re.compile(r"^[A-Z][A-Z0-9_]+$")


def _raised_reasons() -> dict[str, str]:
    """Each `reason="..."` an error is built with in the services, shared and the CLI, with where."""
    found = {}
    for folder in ("services", "shared", "covel_cli"):
        for path in (REPO_ROOT / folder).rglob("*.py"):
            if "gen" in path.relative_to(REPO_ROOT).parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.keyword) and node.arg == "reason" and isinstance(node.value, ast.Constant) \
                        and isinstance(node.value.value, str) and UPPER_SNAKE.match(node.value.value):
                    found[node.value.value] = f"{path.relative_to(REPO_ROOT)}:{node.value.lineno}"
    return found


def test_every_reason_the_code_raises_is_in_the_table() -> None:
    raised = _raised_reasons()
    assert raised, "the scan found no reason at all: it is broken"
    missing = {reason: where for reason, where in raised.items() if reason not in REASONS}
    assert not missing, f"add these to shared/error_reasons.py REASONS (and run python -m covel_cli.doc_tables --write): {missing}"
    for reason, entry in REASONS.items():
        assert reason != default_reason(entry.code), f"{reason} is its code's name: it needs no entry"


@pytest.mark.parametrize("error", [invalid_argument("session_id", "a session id"), ServiceError(grpc.StatusCode.INTERNAL, "boom"),
                                   ServiceError(grpc.StatusCode.ABORTED, "busy", reason="SESSION_BUSY")])
def test_every_status_carries_error_info(error: ServiceError) -> None:
    status = error.to_status()
    infos = []
    for _, value in status.trailing_metadata:
        if isinstance(value, bytes):
            for detail in status_pb2.Status.FromString(value).details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    infos.append(info)
    assert [(info.reason, info.domain) for info in infos] == [(error.reason or error.code.name, ERROR_DOMAIN)]
