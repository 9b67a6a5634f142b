"""`GET /api/sessions/{session_id}/media?path=…[&pluginId=…]`: a file the session may show (the scheduler's GetMedia,
with the caller's own token), answered as itself rather than as JSON: its allow-listed content type, and headers
that keep it inert (docs/web.md, "Media and webview files"). A webview page is served with its own content security
policy and sandbox, so even opened on its own it runs as a sandboxed frame with no origin, no network and no way to
the player's page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from covel.scheduler.v1 import scheduler_pb2
from services.web.grpc_errors import error_body, request_error

# A webview page's policy: its own inline script and style, pictures as data: URLs, nothing fetched, no form, no base.
WEBVIEW_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; media-src data:; "
    "font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'; frame-ancestors 'self'; sandbox allow-scripts"
)
# Any other file: nothing runs, not even when opened on its own.
MEDIA_CSP = "default-src 'none'; img-src 'self'; media-src 'self'; style-src 'unsafe-inline'; sandbox"


def headers_for(content_type: str) -> dict[str, str]:
    csp = WEBVIEW_CSP if content_type.startswith("text/html") else MEDIA_CSP
    return {
        "content-security-policy": csp,
        "x-content-type-options": "nosniff",
        "cache-control": "private, max-age=300",
        "cross-origin-resource-policy": "same-origin",
        "referrer-policy": "no-referrer",
    }


def media_endpoint(
    state: dict[str, Any], metadata: Callable[[Request], tuple[tuple[str, str], ...]], timeout_s: float
) -> Callable[[Request], Awaitable[Response]]:
    async def media(request: Request) -> Response:
        unknown = set(request.query_params) - {"path", "pluginId"}
        if unknown:
            status, body = request_error(sorted(unknown)[0], "is no parameter of GetMedia; its parameters: path, pluginId")
            return JSONResponse(body, status)
        message = scheduler_pb2.GetMediaRequest(
            session_id=request.path_params["session_id"],
            path=request.query_params.get("path", ""),
            plugin_id=request.query_params.get("pluginId", ""),
        )
        try:
            reply = await state["stub"].GetMedia(message, metadata=metadata(request), timeout=timeout_s)
        except grpc.aio.AioRpcError as error:
            status, body = error_body(error)
            return JSONResponse(body, status)
        return Response(reply.file.data, media_type=reply.file.content_type, headers=headers_for(reply.file.content_type))

    return media
