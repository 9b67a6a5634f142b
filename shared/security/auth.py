"""The client API's bearer token: loading it, proving the caller's principal on the server, sending it from clients."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import Any

import grpc

from shared.errors import ServiceError, abort
from shared.logs import get_logger
from shared.security.principals import (
    INVALID_TOKEN,
    MISSING_TOKEN,
    AuthenticationFailed,
    Authenticator,
    Principal,
    authenticator_from,
)
from shared.settings import PrincipalSettings, SecuritySettings

# A grpc method behaviour (unary or streaming, request or iterator in, response or iterator out).
Handler = Callable[..., Any]

__all__ = ["INVALID_TOKEN", "MISSING_TOKEN", "Authorize", "PrincipalInterceptor", "caller", "client_api_interceptors", "load_api_token"]

AUTHORIZATION = "authorization"
_CALLER: ContextVar[Principal | None] = ContextVar("covel_caller", default=None)
# Probes and tooling: health and reflection answer without a token.
OPEN_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.v1alpha.ServerReflection/", "/grpc.reflection.v1.ServerReflection/")


class TokenConfigError(ValueError):
    """A token setting that cannot work (both variants set, an empty or unreadable file)."""


def load_api_token(settings: SecuritySettings) -> str | None:
    """COVEL_API_TOKEN or the contents of COVEL_API_TOKEN_FILE (surrounding whitespace dropped); None when unset."""
    if settings.api_token is not None and settings.api_token_file is not None:
        raise TokenConfigError("set COVEL_API_TOKEN or COVEL_API_TOKEN_FILE, not both")
    if settings.api_token_file is not None:
        try:
            token = settings.api_token_file.read_text().strip()
        except OSError as error:
            raise TokenConfigError(f"COVEL_API_TOKEN_FILE={settings.api_token_file}: cannot read it ({error.strerror or error})") from None
        if not token:
            raise TokenConfigError(f"COVEL_API_TOKEN_FILE={settings.api_token_file}: the file is empty")
        return token
    if settings.api_token is not None:
        token = settings.api_token.get_secret_value().strip()
        if not token:
            raise TokenConfigError("COVEL_API_TOKEN is set but empty; unset it to turn the check off")
        return token
    return None


def bearer_of(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The token of a call's `authorization: Bearer <token>`, or None when it sends none."""
    for key, value in metadata or ():
        if key == AUTHORIZATION:
            presented = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = presented.strip().partition(" ")
            if scheme.lower() != "bearer":
                return None
            return token.strip() or None
    return None


def _rejecting(handler: grpc.RpcMethodHandler, code: grpc.StatusCode, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same kind that answers `code` without running the method."""

    async def reject(request_or_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        await abort(context, code, message)

    return _same_kind(handler, reject, reject, reject, reject)


def _same_kind(
    handler: grpc.RpcMethodHandler, unary_unary: Handler, unary_stream: Handler, stream_unary: Handler, stream_stream: Handler
) -> grpc.RpcMethodHandler:
    kwargs = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary_unary, **kwargs)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(unary_stream, **kwargs)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(stream_unary, **kwargs)
    return grpc.stream_stream_rpc_method_handler(stream_stream, **kwargs)


# Checks a call's request before the method runs, with caller() set: raises ServiceError to refuse it.
Authorize = Callable[[str, Any], Awaitable[None]]


async def _refuse(context: grpc.aio.ServicerContext, error: Exception) -> None:
    """Abort the call with the authorization's answer: its own status, a peer's relayed, never a traceback."""
    if isinstance(error, ServiceError):
        await context.abort_with_status(error.to_status())
    if isinstance(error, grpc.aio.AioRpcError):
        await abort(context, error.code(), error.details() or "")
    get_logger().error("auth.authorize_failed", error=repr(error))
    await abort(context, grpc.StatusCode.INTERNAL, "the access check failed; see the server log")


def _as(principal: Principal, handler: grpc.RpcMethodHandler, method: str, authorize: Authorize | None) -> grpc.RpcMethodHandler:
    """The handler, run with `principal` as the caller (each call runs in a task of its own), once
    `authorize` passed its request."""

    async def admitted(request: Any, context: grpc.aio.ServicerContext) -> bool:
        if authorize is None:
            return True
        try:
            await authorize(method, request)
        except Exception as error:  # answered as a status by _refuse
            await _refuse(context, error)
            return False
        return True

    async def single(request, context):
        bound = _CALLER.set(principal)
        try:
            if await admitted(request, context):
                return await handler.unary_unary(request, context)
        finally:
            _CALLER.reset(bound)

    async def streaming(request, context):
        bound = _CALLER.set(principal)
        try:
            if await admitted(request, context):
                async for reply in handler.unary_stream(request, context):
                    yield reply
        finally:
            _CALLER.reset(bound)

    async def refused(request_iterator, context):
        # A client-streaming request is not one message to check: refused rather than let through.
        await abort(context, grpc.StatusCode.UNIMPLEMENTED, f"{method} streams requests; the client API authorizes single requests only")

    return _same_kind(handler, single, streaming, refused, refused)


class PrincipalInterceptor(grpc.aio.ServerInterceptor):
    """Every method but health and reflection runs as the principal its bearer token proves, or is refused."""

    def __init__(self, authenticator: Authenticator, authorize: Authorize | None = None) -> None:
        self._authenticator = authenticator
        self._authorize = authorize

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(OPEN_METHOD_PREFIXES):
            return handler
        try:
            principal = await self._authenticator.principal_of(bearer_of(handler_call_details.invocation_metadata))
        except AuthenticationFailed as failed:
            return _rejecting(handler, failed.code, failed.message)
        return _as(principal, handler, handler_call_details.method, self._authorize)


def caller() -> Principal:
    """Who makes the current client-API call. Fails closed: a server built without
    client_api_interceptors has no caller, and nothing runs as anyone."""
    principal = _CALLER.get()
    if principal is None:
        raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, "no authenticated caller: the server runs without client_api_interceptors")
    return principal


def client_api_interceptors(settings: PrincipalSettings, authorize: Authorize | None = None) -> list[grpc.aio.ServerInterceptor]:
    """The scheduler's interceptors for its public API: who calls (shared/security/principals.py),
    and `authorize`, which sees each request first (the scheduler's session ownership)."""
    return [PrincipalInterceptor(authenticator_from(settings, load_api_token(settings)), authorize)]


class _WithToken:
    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*tuple(details.metadata or ()))
        metadata.add(AUTHORIZATION, self._header)
        return grpc.aio.ClientCallDetails(details.method, details.timeout, metadata, details.credentials, details.wait_for_ready)


class _UnaryUnary(_WithToken, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return await continuation(self._details(client_call_details), request)


class _UnaryStream(_WithToken, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation, client_call_details, request):
        return await continuation(self._details(client_call_details), request)


class _StreamUnary(_WithToken, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return await continuation(self._details(client_call_details), request_iterator)


class _StreamStream(_WithToken, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return await continuation(self._details(client_call_details), request_iterator)


def bearer_token_interceptors(token: str) -> list:
    """Client interceptors that send `authorization: Bearer <token>` on every call."""
    return [_UnaryUnary(token), _UnaryStream(token), _StreamUnary(token), _StreamStream(token)]
