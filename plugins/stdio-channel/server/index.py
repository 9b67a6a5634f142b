"""A line-oriented stdin/stdout channel, built only on the hookspecs provide_channels and resolve_session.

`covel channel stdio-channel` hosts it: each line read from stdin is one inbound message (an action, or a
command such as `/answer name=Wren`); what its turn printed is written to stdout. End of input ends the
channel. With COVEL_STDIO_SESSION set, the lines go to that session; otherwise the host starts one.
"""

import asyncio
import os
import sys

from shared.plugin_sdk.hookspecs import hookimpl

CHANNEL = "stdio"


class LineChannel:
    name = CHANNEL

    def __init__(self, message_handler):
        self._handler = message_handler

    async def start(self):
        """Read lines until end of input; each goes to the handler (and its turn runs) before the next is read."""
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            if line.strip():
                await self._handler({"channel": CHANNEL, "chat_id": "local", "content": line.rstrip("\n")})

    async def stop(self):
        sys.stdout.flush()

    async def send(self, message):
        sys.stdout.write(message["content"])
        sys.stdout.flush()
        return True


class StdioChannel:
    @hookimpl
    def provide_channels(self, message_handler):
        return [LineChannel(message_handler)]

    @hookimpl
    def resolve_session(self, message):
        return os.environ.get("COVEL_STDIO_SESSION") or None


def register(covel):
    covel.register_hookimpls(StdioChannel())
