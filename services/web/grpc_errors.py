"""A scheduler error as the HTTP API answers it: the gRPC status name, its message, the field violations, the
reason and the retry delay it carried, under the HTTP status that means the same."""

from __future__ import annotations

from typing import Any

import grpc

from shared.errors import error_info, field_violations, retry_after_ms

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400, grpc.StatusCode.OUT_OF_RANGE: 400, grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.UNAUTHENTICATED: 401, grpc.StatusCode.PERMISSION_DENIED: 403, grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409, grpc.StatusCode.ABORTED: 409, grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499, grpc.StatusCode.UNAVAILABLE: 503, grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.UNIMPLEMENTED: 501,
}


def error_body(error: grpc.aio.AioRpcError) -> tuple[int, dict[str, Any]]:
    """{code, message} and what the error's google.rpc details say: fieldViolations, reason and metadata, retryAfterMs."""
    body: dict[str, Any] = {"code": error.code().name, "message": error.details() or ""}
    violations = field_violations(error)
    if violations:
        body["fieldViolations"] = [{"field": v.field, "description": v.description} for v in violations]
    info = error_info(error)
    if info is not None:
        body["reason"] = info.reason
        if info.metadata:
            body["metadata"] = dict(info.metadata)
    wait_ms = retry_after_ms(error)
    if wait_ms is not None:
        body["retryAfterMs"] = wait_ms
    return HTTP_STATUS.get(error.code(), 500), body


def request_error(field: str, message: str) -> tuple[int, dict[str, Any]]:
    """The answer to a request the API could not even turn into an RPC (bad JSON, an unknown field)."""
    return 400, {"code": "INVALID_ARGUMENT", "message": f"{field}: {message}", "fieldViolations": [{"field": field, "description": message}]}
