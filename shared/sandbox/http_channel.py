"""The worker's side of covel.http / ctx.http: each request (one hop; the client follows redirects
as new requests) goes to the host over the channel (`sandbox.http`), which checks and sends it
(shared/sandbox/http_gate.py). The worker itself has no network."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

# Sends one request's plain data to the host and awaits its answer.
Send = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class ChannelTransport(httpx.AsyncBaseTransport):
    """An httpx transport whose requests the host sends."""

    def __init__(self, send: Send) -> None:
        self._send = send

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        answer = await self._send({
            "method": request.method, "url": str(request.url),
            "headers": [[name, value] for name, value in request.headers.multi_items()],
            "body": base64.b64encode(body).decode("ascii"),
        })
        return httpx.Response(
            int(answer["status"]), headers=[(str(k), str(v)) for k, v in answer.get("headers") or []],
            content=base64.b64decode(str(answer.get("body") or "")), request=request,
            extensions={"http_version": str(answer.get("http_version") or "HTTP/1.1").encode()},
        )
