"""Play a session from Python: `python play.py 127.0.0.1:50150 "I open the door."` (the services running, e.g.
`make run` in the kernel's repository; with a token: COVEL_API_TOKEN=... python play.py ...)."""

import asyncio
import os
import sys

from covel_client import Client, CovelError
from covel_client.v1 import scheduler_pb2


async def main(addr: str, actions: list[str]) -> int:
    async with Client(addr, token=os.environ.get("COVEL_API_TOKEN")) as covel:
        excluded = [plugin for plugin in os.environ.get("EXCLUDED_PLUGINS", "").split(",") if plugin]
        session = await covel.create_session(scheduler_pb2.CreateSessionRequest(excluded_plugins=excluded))
        print(f"session {session.id}")
        for text in actions:
            turn = await covel.play(session.id, text)
            print(f"> {text}\n{turn.narrative}\n")
        print(f"{len([turn async for turn in covel.turns(session.id, page_size=1)])} turns recorded")
        try:
            await covel.get_session("no-such-session")
        except CovelError as error:
            print(f"asked for a missing session: {error.code.name} {error.reason} {error.resource}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2:] or ["I look around."])))
