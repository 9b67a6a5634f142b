"""The web front's ASGI app (Starlette): the HTTP/JSON API of routes.py, its OpenAPI description, the player page
(static/), health. Every API call is one call of the scheduler's client API with the caller's own bearer token."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from services.web import cjk_font, routes
from services.web.grpc_errors import error_body, request_error
from services.web.media_route import media_endpoint
from services.web.oidc_login import OidcLogin
from services.web.openapi import MEDIA_PATH, openapi_document
from shared.grpc_client import check_health, open_channel
from shared.logs import get_logger
from shared.settings import SecuritySettings
from shared.telemetry import metrics
from shared.turn_event_batches import events_of

request_log = get_logger(component="web")

STATIC = Path(__file__).parent / "static"
MAX_BODY = 256 * 1024
# Path fields whose values hold a slash (a runtime id is <plugin>/<runtime>).
SLASHED = ("runtime_id",)


class BadRequest(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def to_json(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=False)


async def _body(request: Request, limit: int = MAX_BODY) -> dict[str, Any]:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BadRequest("body", f"is {declared} bytes; at most {limit}")
    raw = await request.body()
    if len(raw) > limit:
        raise BadRequest("body", f"is {len(raw)} bytes; at most {limit}")
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as error:
        raise BadRequest("body", f"is not JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    if not isinstance(body, dict):
        raise BadRequest("body", "must be a JSON object")
    return body


def _query(route: routes.Route, request: Request) -> dict[str, Any]:
    """GET parameters typed by the request's fields (a bool is true/false, a repeated field may repeat)."""
    fields = route.request_type.DESCRIPTOR.fields_by_camelcase_name
    values: dict[str, Any] = {}
    for name in request.query_params:
        field = fields.get(name) or route.request_type.DESCRIPTOR.fields_by_name.get(name)
        if field is None:
            raise BadRequest(name, f"is no parameter of {route.rpc}; its parameters: {', '.join(sorted(fields))}")
        raw = request.query_params.getlist(name)
        typed = [_typed(field, name, value) for value in raw]
        values[field.json_name] = typed if field.is_repeated else typed[-1]
    return values


def _typed(field: FieldDescriptor, name: str, value: str) -> Any:
    if field.type == FieldDescriptor.TYPE_BOOL:
        if value not in ("true", "false"):
            raise BadRequest(name, "is true or false")
        return value == "true"
    return value


async def build_request(route: routes.Route, request: Request) -> Message:
    values = _query(route, request) if route.method == "GET" else await _body(request, route.max_body or MAX_BODY)
    for name in route.path_fields:
        values[name] = request.path_params[name]
    message = route.request_type()
    try:
        json_format.ParseDict(values, message)
    except json_format.ParseError as error:
        raise BadRequest("body", str(error)) from None
    return message


def _metadata(request: Request) -> tuple[tuple[str, str], ...]:
    """The caller's own token, passed on: the scheduler decides who it is and what it may do."""
    authorization = request.headers.get("authorization")
    return (("authorization", authorization),) if authorization else ()


def _event_name(event: Message) -> str:
    return event.WhichOneof("event") or "event"


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _event(event: Message) -> bytes:
    """`event: <the TurnEvent's field>`, `data: <that field's message as JSON>`."""
    name = _event_name(event)
    if not event.HasField(name):
        return _sse(name, {})
    return _sse(event.DESCRIPTOR.fields_by_name[name].json_name, to_json(getattr(event, name)))


def _events(message: scheduler_pb2.TurnEvent) -> bytes:
    """One Server-Sent Event per TurnEvent: a batch from the scheduler is opened (the page never sees one), its
    events written together."""
    return b"".join(_event(event) for event in events_of(message))


def _batched(message: Message) -> Message:
    """A streamed RPC's request asking the scheduler for batches where the RPC has them (SubmitActions): fewer
    messages between the scheduler and the web front, the same events to the page."""
    if isinstance(message, scheduler_pb2.SubmitActionsRequest):
        message.batch_events = True
    return message


async def _stream(first: scheduler_pb2.TurnEvent, call: AsyncIterator[scheduler_pb2.TurnEvent]) -> AsyncIterator[bytes]:
    yield _events(first)
    try:
        async for event in call:
            yield _events(event)
    except grpc.aio.AioRpcError as error:
        yield _sse("error", error_body(error)[1])
        return
    yield _sse("end", {})


def _endpoint(route: routes.Route, state: dict[str, Any], timeout_s: float) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        started = time.perf_counter()
        response = await answer(request)
        seconds = time.perf_counter() - started
        metrics.record_web_request(route.method, route.path, response.status_code, seconds)
        # One JSON line a request, as the services log theirs (a stream: once its first event is answered).
        request_log.info("http.request", method=route.method, route=route.path, rpc=route.rpc, status=response.status_code,
                         duration_ms=round(seconds * 1000, 1), session_id=request.path_params.get("session_id", ""))
        return response

    async def answer(request: Request) -> Response:
        try:
            message = await build_request(route, request)
        except BadRequest as error:
            status, body = request_error(error.field, str(error))
            return JSONResponse(body, status)
        method = getattr(state["stub"], route.rpc)
        try:
            if not route.streamed:
                return JSONResponse(to_json(await method(message, metadata=_metadata(request), timeout=timeout_s)))
            call = method(_batched(message), metadata=_metadata(request))
            # The first event decides the answer: an error before any is an HTTP error, not a stream.
            first = await call.__aiter__().__anext__()
        except grpc.aio.AioRpcError as error:
            status, body = error_body(error)
            return JSONResponse(body, status)
        except StopAsyncIteration:
            return JSONResponse({"code": "INTERNAL", "message": "the turn stream ended before any event"}, 502)
        return StreamingResponse(_stream(first, call), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache", "x-accel-buffering": "no"})

    return endpoint


def _path(route: routes.Route) -> str:
    path = route.path
    for name in SLASHED:
        path = path.replace("{" + name + "}", "{" + name + ":path}")
    return path


def create_app(scheduler_addr: str, *, security: SecuritySettings | None = None, timeout_s: float = 30.0,
               on_ready: Callable[[], None] | None = None, login: OidcLogin | None = None) -> Starlette:
    state: dict[str, Any] = {}
    document = openapi_document()

    @asynccontextmanager
    async def lifespan(_app):
        async with open_channel(scheduler_addr, security=security) as channel:
            state["channel"] = channel
            state["stub"] = scheduler_pb2_grpc.SchedulerStub(channel)
            if on_ready is not None:
                on_ready()
            yield

    async def openapi(_request: Request) -> Response:
        return JSONResponse(document)

    async def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "SERVING"})

    cjk_css = cjk_font.stylesheet()

    async def cjk_stylesheet(_request: Request) -> Response:
        return Response(cjk_css, media_type="text/css", headers={"cache-control": "public, max-age=86400"})

    async def no_login(_request: Request) -> Response:
        return JSONResponse({})  # no issuer's page to sign in on: the token form only

    async def readyz(_request: Request) -> Response:
        """Ready when the scheduler answers: the page is no use without it."""
        status = await check_health(scheduler_addr, timeout_s=1.0, security=security)
        return JSONResponse({"status": status, "scheduler": status}, 200 if status == "SERVING" else 503)

    api = [Route(_path(route), _endpoint(route, state, timeout_s), methods=[route.method]) for route in routes.ROUTES]
    media = Route(MEDIA_PATH, media_endpoint(state, _metadata, timeout_s), methods=["GET"])
    return Starlette(
        routes=[Route("/api/openapi.json", openapi), Route("/healthz", healthz), Route("/readyz", readyz), media, *api,
                *(login.routes() if login is not None else [Route("/api/auth", no_login)]),
                Route("/fonts/cjk.css", cjk_stylesheet),
                Mount(cjk_font.URL_PREFIX.rstrip("/"), StaticFiles(directory=cjk_font.FONT_DIR, check_dir=False)),
                Mount("/", StaticFiles(directory=STATIC, html=True))],
        lifespan=lifespan,
    )
