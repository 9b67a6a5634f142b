"""A scheduler error as the HTTP API answers it: the gRPC status name, its message, the field violations and the
retry delay it carried, under the HTTP status that means the same."""

from __future__ import annotations

from typing import Any

import grpc
from google.rpc import error_details_pb2  # type: ignore[import-untyped]  # googleapis-common-protos ships no stubs
from grpc_status import rpc_status

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400, grpc.StatusCode.OUT_OF_RANGE: 400, grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.UNAUTHENTICATED: 401, grpc.StatusCode.PERMISSION_DENIED: 403, grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409, grpc.StatusCode.ABORTED: 409, grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499, grpc.StatusCode.UNAVAILABLE: 503, grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.UNIMPLEMENTED: 501,
}


def error_body(error: grpc.aio.AioRpcError) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {"code": error.code().name, "message": error.details() or ""}
    status = rpc_status.from_call(error)
    for detail in status.details if status is not None else []:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            found = error_details_pb2.BadRequest()
            detail.Unpack(found)
            body.setdefault("fieldViolations", []).extend({"field": v.field, "description": v.description} for v in found.field_violations)
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            body["retryAfterMs"] = retry.retry_delay.seconds * 1000 + retry.retry_delay.nanos // 1_000_000
    return HTTP_STATUS.get(error.code(), 500), body


def request_error(field: str, message: str) -> tuple[int, dict[str, Any]]:
    """The answer to a request the API could not even turn into an RPC (bad JSON, an unknown field)."""
    return 400, {"code": "INVALID_ARGUMENT", "message": f"{field}: {message}", "fieldViolations": [{"field": field, "description": message}]}
