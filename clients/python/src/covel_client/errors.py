"""A failed call as a program reads it: the status code, the stable reason (google.rpc.ErrorInfo) and the other
google.rpc details the server sent (BadRequest, ResourceInfo, PreconditionFailure, RetryInfo)."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

# The trailer a status with details comes in (grpc-status-details-bin: a serialized google.rpc.Status).
_DETAILS_KEY = "grpc-status-details-bin"


@dataclass
class CovelError(Exception):
    code: grpc.StatusCode
    message: str
    # ErrorInfo: a stable reason (docs/api.md lists them) and its domain, "covel.dev".
    reason: str = ""
    domain: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    # BadRequest: (field path, what is wrong) for each field refused.
    field_violations: list[tuple[str, str]] = field(default_factory=list)
    # ResourceInfo: (type, name) of what was not found.
    resource: tuple[str, str] | None = None
    # PreconditionFailure: (type, subject, description) of each precondition not met.
    preconditions: list[tuple[str, str, str]] = field(default_factory=list)
    # RetryInfo: how long to wait before the same request may pass.
    retry_after_s: float | None = None

    def __str__(self) -> str:
        return f"{self.code.name} {self.reason}: {self.message}"

    @classmethod
    def of(cls, error: grpc.RpcError) -> CovelError:
        """The error of a failed call (grpc.aio.AioRpcError or grpc.RpcError), its details decoded."""
        code, message = error.code(), error.details() or ""  # type: ignore[attr-defined]
        found = cls(code, message)
        for key, value in error.trailing_metadata() or ():  # type: ignore[attr-defined]
            if key == _DETAILS_KEY:
                status = status_pb2.Status.FromString(value)
                for detail in status.details:
                    found._take(detail)
        return found

    def _take(self, detail: any_pb2.Any) -> None:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            self.reason, self.domain, self.metadata = info.reason, info.domain, dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            self.field_violations += [(v.field, v.description) for v in bad.field_violations]
        elif detail.Is(error_details_pb2.ResourceInfo.DESCRIPTOR):
            resource = error_details_pb2.ResourceInfo()
            detail.Unpack(resource)
            self.resource = (resource.resource_type, resource.resource_name)
        elif detail.Is(error_details_pb2.PreconditionFailure.DESCRIPTOR):
            failure = error_details_pb2.PreconditionFailure()
            detail.Unpack(failure)
            self.preconditions += [(v.type, v.subject, v.description) for v in failure.violations]
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            self.retry_after_s = retry.retry_delay.seconds + retry.retry_delay.nanos / 1e9
