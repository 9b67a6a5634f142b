"""The client API's bearer token: loading it, checking it on the server, sending it from clients."""

from __future__ import annotations

import hmac
from collections.abc import Sequence

import grpc

from shared.settings import SecuritySettings

AUTHORIZATION = "authorization"
MISSING_TOKEN = "missing bearer token: send metadata 'authorization: Bearer <token>'"
INVALID_TOKEN = "invalid bearer token"
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


def token_problem(metadata: Sequence[tuple[str, str | bytes]] | None, expected: bytes) -> str | None:
    """Why a call's metadata does not carry the expected token, or None when it does."""
    presented = None
    for key, value in metadata or ():
        if key == AUTHORIZATION:
            presented = value.decode() if isinstance(value, bytes) else value
            break
    if presented is None:
        return MISSING_TOKEN
    scheme, _, token = presented.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return MISSING_TOKEN
    # Constant time: how much of a guess matched does not show in the answer's timing.
    if not hmac.compare_digest(token.strip().encode(), expected):
        return INVALID_TOKEN
    return None


def _rejecting(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same kind that answers UNAUTHENTICATED without running the method."""

    async def reject(request_or_iterator, context: grpc.aio.ServicerContext):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    kwargs = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(reject, **kwargs)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(reject, **kwargs)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(reject, **kwargs)
    return grpc.stream_stream_rpc_method_handler(reject, **kwargs)


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    """Every method but health and reflection requires `authorization: Bearer <token>`."""

    def __init__(self, token: str) -> None:
        self._expected = token.encode()

    async def intercept_service(self, continuation, handler_call_details: grpc.HandlerCallDetails):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(OPEN_METHOD_PREFIXES):
            return handler
        problem = token_problem(handler_call_details.invocation_metadata, self._expected)
        return handler if problem is None else _rejecting(handler, problem)


def client_api_interceptors(settings: SecuritySettings) -> list[grpc.aio.ServerInterceptor]:
    """The scheduler's interceptors for its public API: the token check when a token is configured."""
    token = load_api_token(settings)
    return [BearerTokenInterceptor(token)] if token else []


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
