"""Errors with the right gRPC status, and field violations for bad input.

Service code raises `ServiceError` (or one of the shortcuts); the `rpc` decorator turns
it into a status with `google.rpc.BadRequest` details, so any client sees which field
was wrong and what to do. Unexpected exceptions become INTERNAL with a log line.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, AnyStr

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]  # googleapis-common-protos ships no stubs
from grpc_status import rpc_status

from shared.logs import get_logger


@dataclass
class FieldViolation:
    field: str
    description: str


@dataclass
class ServiceError(Exception):
    code: grpc.StatusCode
    message: str
    violations: list[FieldViolation] = field(default_factory=list)

    def __str__(self) -> str:
        return self.message

    def to_status(self) -> grpc.Status:
        details = []
        if self.violations:
            bad_request = error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                    for v in self.violations
                ]
            )
            packed = any_pb2.Any()
            packed.Pack(bad_request)
            details.append(packed)
        status = status_pb2.Status(code=self.code.value[0], message=self.message, details=details)
        return rpc_status.to_status(status)


def invalid_argument(field_path: str, description: str) -> ServiceError:
    return ServiceError(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"{field_path}: {description}",
        [FieldViolation(field_path, description)],
    )


def not_found(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.NOT_FOUND, message)


def failed_precondition(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.FAILED_PRECONDITION, message)


def aborted(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.ABORTED, message)


def unavailable(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAVAILABLE, message)


def field_violations(error: grpc.aio.AioRpcError | grpc.RpcError) -> list[FieldViolation]:
    """The BadRequest field violations a peer sent with an error, for tests and clients."""
    status = rpc_status.from_call(error)
    found: list[FieldViolation] = []
    if status is None:
        return found
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            found.extend(FieldViolation(v.field, v.description) for v in bad_request.field_violations)
    return found


async def _abort(context: grpc.aio.ServicerContext, error: ServiceError) -> None:
    await context.abort_with_status(error.to_status())


def _relay(error: grpc.aio.AioRpcError) -> ServiceError:
    """A peer's error passed on: caller mistakes keep their code, outages stay retryable."""
    return ServiceError(error.code(), error.details() or "", [])


def rpc(method: Callable[..., Any]) -> Callable[..., Any]:
    """Map ServiceError (and peers' errors) to statuses for unary and server-streaming methods."""
    name = method.__qualname__

    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def stream_wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                async for item in method(self, request, context):
                    yield item
            except ServiceError as error:
                await _abort(context, error)
            except grpc.aio.AioRpcError as error:
                await _abort(context, _relay(error))
            except Exception:
                get_logger(rpc=name).exception("rpc.failed")
                await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {name}; see the server log")

        return stream_wrapper

    @functools.wraps(method)
    async def unary_wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await method(self, request, context)
        except ServiceError as error:
            await _abort(context, error)
        except grpc.aio.AioRpcError as error:
            await _abort(context, _relay(error))
        except Exception:
            get_logger(rpc=name).exception("rpc.failed")
            await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {name}; see the server log")

    return unary_wrapper


def require(value: AnyStr, field_path: str, what: str) -> AnyStr:
    """A required string (or bytes) field: INVALID_ARGUMENT naming the field when empty."""
    if not value or not value.strip():
        raise invalid_argument(field_path, f"is required: {what}")
    return value

