"""Errors with the right gRPC status, and field violations for bad input.

Service code raises `ServiceError` (or one of the shortcuts); the `rpc` decorator turns
it into a status with `google.rpc.BadRequest` details, so any client sees which field
was wrong and what to do. Unexpected exceptions become INTERNAL with a log line.

Before a method runs, `rpc` checks the request's ids and Structs (shared/request_limits.py). A
message never echoes client input in full: any run of text without spaces longer than
ECHO_MAX_CHARS is cut (a megabyte id reads as its first characters and its length), and a whole
message is at most MESSAGE_MAX_CHARS. Network addresses (gRPC's `ipv4:127.0.0.1:50051`, bare IPs)
are replaced by "(an internal address)", also in a peer's error passed on.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, AnyStr

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]  # googleapis-common-protos ships no stubs
from grpc_status import rpc_status

from shared.error_reasons import ERROR_DOMAIN, PEER_PREFIX, default_reason
from shared.logs import get_logger
from shared.request_limits import request_violation

ECHO_MAX_CHARS = 160
MESSAGE_MAX_CHARS = 2000
_LONG_RUN = re.compile(rf"\S{{{ECHO_MAX_CHARS + 1},}}")
# gRPC core's target forms, then IPv4 and bracketed IPv6 with an optional port.
_ADDRESS = re.compile(
    r"\b(?:ipv4|ipv6|unix|unix-abstract|dns|vsock):[^\s,;\"']+|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\[[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*\](?::\d+)?"
)
INTERNAL_ADDRESS = "(an internal address)"


def shortened(text: str) -> str:
    """`text` without network addresses, every over-long unbroken run cut to its start and its length,
    and at most MESSAGE_MAX_CHARS."""
    text = _ADDRESS.sub(INTERNAL_ADDRESS, text)
    text = _LONG_RUN.sub(lambda match: f"{match.group()[:40]}…({len(match.group())} characters)", text)
    return text if len(text) <= MESSAGE_MAX_CHARS else f"{text[: MESSAGE_MAX_CHARS - 1]}…"


@dataclass
class FieldViolation:
    field: str
    description: str


# google.rpc.ErrorInfo.domain of every reason this kernel gives (docs/api.md "Errors").
# Failures another try may not meet: a peer restarting or overloaded, or too slow this once.
PASSING_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
# How long a client waits before retrying a passing failure, when nothing says better.
RETRY_AFTER_MS = 500


@dataclass
class ServiceError(Exception):
    """`reason` (UPPER_SNAKE, stable) and `metadata` go out as google.rpc.ErrorInfo; `retry_after_ms` as RetryInfo."""

    code: grpc.StatusCode
    message: str
    violations: list[FieldViolation] = field(default_factory=list)
    reason: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    retry_after_ms: int | None = None
    # google.rpc.ResourceInfo / PreconditionFailure and any other details, packed (a peer's passed on).
    details: list[any_pb2.Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.message = shortened(self.message)
        for violation in self.violations:
            violation.field = shortened(violation.field)
            violation.description = shortened(violation.description)

    def __str__(self) -> str:
        return self.message

    def to_status(self) -> grpc.Status:
        return rpc_status.to_status(self.to_status_proto())

    def to_status_proto(self) -> status_pb2.Status:
        """The google.rpc.Status of this error, with its details (what a TurnHooks answer carries)."""
        details = []
        if self.violations:
            bad_request = error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                    for v in self.violations
                ]
            )
            details.append(_packed(bad_request))
        # Every error carries ErrorInfo: its reason (shared/error_reasons.py), else its code's name.
        reason = self.reason or default_reason(self.code)
        details.append(_packed(error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN, metadata=self.metadata)))
        if self.retry_after_ms is not None:
            delay = error_details_pb2.RetryInfo()
            delay.retry_delay.FromMilliseconds(self.retry_after_ms)
            details.append(_packed(delay))
        details.extend(self.details)
        return status_pb2.Status(code=self.code.value[0], message=self.message, details=details)


def _packed(detail: Message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(detail)
    return packed


def invalid_argument(field_path: str, description: str) -> ServiceError:
    return invalid_arguments([FieldViolation(field_path, description)])


def invalid_arguments(violations: list[FieldViolation]) -> ServiceError:
    """INVALID_ARGUMENT naming every violation; its message is the first one's."""
    first = violations[0]
    return ServiceError(grpc.StatusCode.INVALID_ARGUMENT, f"{first.field}: {first.description}", list(violations))


def not_found(message: str, resource_type: str = "", resource_name: str = "", reason: str = "") -> ServiceError:
    """NOT_FOUND; naming the resource adds google.rpc.ResourceInfo (its type is the proto message, e.g. covel.store.v1.Session)."""
    details = [_packed(error_details_pb2.ResourceInfo(resource_type=resource_type, resource_name=shortened(resource_name)))] \
        if resource_type else []
    return ServiceError(grpc.StatusCode.NOT_FOUND, message, reason=reason, details=details)


def failed_precondition(message: str, reason: str = "", subject: str = "") -> ServiceError:
    """FAILED_PRECONDITION; a reason adds google.rpc.PreconditionFailure (type = the reason, the subject it is about)."""
    details = [_packed(error_details_pb2.PreconditionFailure(violations=[error_details_pb2.PreconditionFailure.Violation(
        type=reason, subject=shortened(subject), description=shortened(message))]))] if reason else []
    return ServiceError(grpc.StatusCode.FAILED_PRECONDITION, message, reason=reason, details=details)


def session_not_found(session_id: str) -> ServiceError:
    """The one answer for a session id that names no session (or one the caller may not see)."""
    return not_found(f"session {session_id} not found", "covel.scheduler.v1.Session", session_id, reason="SESSION_NOT_FOUND")


def aborted(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.ABORTED, message)


def unavailable(message: str, reason: str = "", retry_after_ms: int = RETRY_AFTER_MS, **metadata: str) -> ServiceError:
    """A passing failure: the client may retry (RetryInfo says when)."""
    return ServiceError(grpc.StatusCode.UNAVAILABLE, message, reason=reason, metadata=metadata, retry_after_ms=retry_after_ms)


def permission_denied(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.PERMISSION_DENIED, message)


def field_violations(error: grpc.aio.AioRpcError | grpc.RpcError) -> list[FieldViolation]:
    """The BadRequest field violations a peer sent with an error, for tests and clients."""
    found: list[FieldViolation] = []
    for bad_request in _details(error, error_details_pb2.BadRequest):
        found.extend(FieldViolation(v.field, v.description) for v in bad_request.field_violations)
    return found


def error_info(error: grpc.aio.AioRpcError | grpc.RpcError) -> Any:
    """The google.rpc.ErrorInfo a peer sent with an error, or None."""
    return next(iter(_details(error, error_details_pb2.ErrorInfo)), None)


def retry_after_ms(error: grpc.aio.AioRpcError | grpc.RpcError) -> int | None:
    """The delay of the google.rpc.RetryInfo a peer sent with an error, or None."""
    found = next(iter(_details(error, error_details_pb2.RetryInfo)), None)
    return None if found is None else found.retry_delay.ToMilliseconds()


def _details(error: grpc.aio.AioRpcError | grpc.RpcError, kind: Any) -> list[Any]:
    status = rpc_status.from_call(error)
    found = []
    for detail in status.details if status is not None else ():
        if detail.Is(kind.DESCRIPTOR):
            message = kind()
            detail.Unpack(message)
            found.append(message)
    return found


async def _abort(context: grpc.aio.ServicerContext, error: ServiceError) -> None:
    await context.abort_with_status(error.to_status())


async def abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str, reason: str = "") -> None:
    """End the call with `code` and its ErrorInfo (for code outside an `rpc` method: interceptors, checks)."""
    await _abort(context, ServiceError(code, message, reason=reason))


def relayed(error: grpc.aio.AioRpcError) -> ServiceError:
    """A peer's error passed on: caller mistakes keep their code, the fields the peer named and its reason; outages
    stay retryable, with the peer's RetryInfo or RETRY_AFTER_MS."""
    info = error_info(error)
    retry = retry_after_ms(error)
    if retry is None and error.code() in PASSING_CODES:
        retry = RETRY_AFTER_MS
    reason = info.reason if info is not None else (f"{PEER_PREFIX}{error.code().name}" if error.code() in PASSING_CODES else "")
    return ServiceError(error.code(), error.details() or "", field_violations(error), reason=reason,
                        metadata=dict(info.metadata) if info is not None else {}, retry_after_ms=retry, details=_other_details(error))


def _other_details(error: grpc.aio.AioRpcError) -> list[any_pb2.Any]:
    """A peer's details other than those ServiceError rebuilds (BadRequest, ErrorInfo, RetryInfo), as they came."""
    status = rpc_status.from_call(error)
    rebuilt = (error_details_pb2.BadRequest.DESCRIPTOR, error_details_pb2.ErrorInfo.DESCRIPTOR, error_details_pb2.RetryInfo.DESCRIPTOR)
    return [detail for detail in (status.details if status is not None else ()) if not any(detail.Is(kind) for kind in rebuilt)]


def request_problem(request: Any) -> ServiceError | None:
    """INVALID_ARGUMENT naming the first field of `request` over the limits (shared/request_limits.py); None when all fit."""
    if isinstance(request, Message):
        violation = request_violation(request)
        if violation is not None:
            return invalid_argument(*violation)
    return None


def _check_request(request: Any) -> None:
    problem = request_problem(request)
    if problem is not None:
        raise problem


def rpc(method: Callable[..., Any]) -> Callable[..., Any]:
    """Map ServiceError (and peers' errors) to statuses for unary and server-streaming methods."""
    name = method.__qualname__

    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def stream_wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                _check_request(request)
                async for item in method(self, request, context):
                    yield item
            except ServiceError as error:
                await _abort(context, error)
            except grpc.aio.AioRpcError as error:
                await _abort(context, relayed(error))
            except Exception:
                get_logger(rpc=name).exception("rpc.failed")
                await abort(context, grpc.StatusCode.INTERNAL, f"internal error in {name}; see the server log")

        return stream_wrapper

    @functools.wraps(method)
    async def unary_wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            _check_request(request)
            return await method(self, request, context)
        except ServiceError as error:
            await _abort(context, error)
        except grpc.aio.AioRpcError as error:
            await _abort(context, relayed(error))
        except Exception:
            get_logger(rpc=name).exception("rpc.failed")
            await abort(context, grpc.StatusCode.INTERNAL, f"internal error in {name}; see the server log")

    return unary_wrapper


def require(value: AnyStr, field_path: str, what: str) -> AnyStr:
    """A required string (or bytes) field: INVALID_ARGUMENT naming the field when empty."""
    if not value or not value.strip():
        raise invalid_argument(field_path, f"is required: {what}")
    return value

