"""The builtin stdio-channel plugin, built only on the hookspecs provide_channels and resolve_session,
hosted by `covel channel`, plays the demo world end to end through the five services."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

from covel_cli.play import DEMO_ACTIONS
from shared.settings import REPO_ROOT
from tests.e2e.conftest import running_services


async def channel(group, lines: list[str], **env: str) -> subprocess.CompletedProcess:
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "covel_cli.main", "channel", "stdio-channel", "--addr", group.addrs["scheduler"]],
        input="\n".join(lines) + "\n", capture_output=True, text=True, env={**group.env(), **env}, cwd=REPO_ROOT, timeout=180)


async def test_the_stdio_channel_plays_the_demo_world_and_resolve_session_continues_it(tmp_path: Path) -> None:
    async with running_services(tmp_path) as group:
        first = await channel(group, list(DEMO_ACTIONS[:3]))
        assert first.returncode == 0, first.stderr[-3000:]
        # A new session in the demo world, set up (the form answered), then two story turns.
        out = first.stdout
        [session_id] = re.findall(r"^Session (\S+) ", out, flags=re.MULTILINE)
        assert "Saltmere" in out and "? Your character" in out and "This is where the story of Wren begins." in out
        assert "push open the door of the Drowned Lantern" in out and "[turn 2 committed" in out, out[-3000:]
        # resolve_session (COVEL_STDIO_SESSION): the lines go on in the same session.
        again = await channel(group, [DEMO_ACTIONS[3]], COVEL_STDIO_SESSION=session_id)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Session " not in again.stdout and "[turn 3 committed" in again.stdout, again.stdout[-3000:]


async def test_a_plugin_without_channels_is_reported(tmp_path: Path) -> None:
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "covel_cli.main", "channel", "example-hookspecs"],
                                   capture_output=True, text=True, cwd=REPO_ROOT, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and "covel channel: provide_channels gave no channel" in done.stderr, done.stderr
