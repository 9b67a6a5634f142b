"""The offline model's story reads well (issue 43, the first hour): what `make run` shows a newcomer, played through
the five services as `covel play` does. Its prose comes from the world's own places and people, the player's words
come back in the second person, a line said is told as speech, and nothing internal shows (record markers, ids,
another scene's details); no sentence of the story repeats from one turn to another."""

from __future__ import annotations

import io
import re

import pytest

from covel_cli.play import DEFAULT_WORLD, DEMO_ACTIONS, play, scripted_reader

pytestmark = pytest.mark.asyncio(loop_scope="session")
SHARED_SERVICES = True
# The demo's turns, with a line said between them.
ACTIONS = (*DEMO_ACTIONS[:2], "/say Evening, Sela. Is the lighthouse always this dark?", *DEMO_ACTIONS[2:7])
# Generic details of the model's own scenes and people, which Saltmere does not have.
FOREIGN = ("pines lean close", "forest road", "old library", "market square", "mountain inn", "ruined chapel", "Brother Anselm",
           "Kestrel", "Captain Rhee")


def story_of(turn: str) -> list[str]:
    """The story lines of one turn as `covel play` prints them: the unindented lines after the player's input."""
    return [line for line in turn.splitlines()[1:] if line and not line.startswith((" ", "[", "(", "?", "Type what"))]


def sentences(lines: list[str]) -> list[str]:
    return [part.strip() for line in lines for part in re.split(r"(?<=[.!?”])\s+", line) if len(part.strip()) > 12]


async def test_the_demo_story_reads_as_prose(services) -> None:
    out = io.StringIO()
    assert await play(services.addrs["scheduler"], scripted_reader(ACTIONS), out, echo_input=True, world_id=DEFAULT_WORLD) == 0
    turns = out.getvalue().split("\n> ")[1:]
    assert [turn.splitlines()[0] for turn in turns] == list(ACTIONS)
    stories = [story_of(turn) for turn in turns]
    text = "\n".join(line for story in stories for line in story)
    for leak in ("【", "also called", "旅人", "..", " player.", "You act:", "You remember: The traveller", *FOREIGN):
        assert leak not in text, (leak, text)
    said = stories[2]
    assert said[0] == "You say, \u201cEvening, Sela. Is the lighthouse always this dark?\u201d", said
    promise = stories[3]
    assert "promise Mira you will find the missing boats" in promise[0] and "I will" not in promise[0], promise
    assert "🎒 missing boats" not in turns[3], "a promise to find the boats finds none yet"
    seen: dict[str, int] = {}
    for number, story in enumerate(stories):
        for sentence in sentences(story):
            assert seen.setdefault(sentence, number) == number, f"turn {number} repeats turn {seen[sentence]}: {sentence}"
