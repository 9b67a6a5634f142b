"""shared.plugin_sdk.orchestration against a stand-in for ctx.agents (the real services run it in
tests/e2e/test_orchestrator_fallback.py): the session's language, an author's own fallback texts, a player's stop,
and an answer with no usable part."""

from __future__ import annotations

from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest

from shared.plugin_sdk.orchestration import ACTOR_CONTRACT, FALLBACK_LINES, FALLBACK_NARRATIONS, orchestrate_characters

pytestmark = pytest.mark.asyncio


class Agents:
    """Answers in order, recording each request."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers, self.requests = list(answers), []

    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        return self.answers.pop(0)


def ctx(agents: Agents | None, locale: str = "en") -> Any:
    return SimpleNamespace(agents=agents, execution=MappingProxyType({"locale": locale}))


async def test_the_request_names_the_contract_and_the_character_and_a_zh_session_gets_zh_fallbacks() -> None:
    agents = Agents({"ok": False, "error": {"code": "timeout"}})
    told = await orchestrate_characters(ctx(agents, "zh-CN"), [{"name": "米拉", "characterId": "mira"}], brief="门口来了客人。")
    assert agents.requests == [{"target": {"contract": ACTOR_CONTRACT}, "characterId": "mira", "brief": "门口来了客人。"}]
    assert told["segments"] == [{"kind": "narration", "text": FALLBACK_LINES["zh"].format(name="米拉")}]
    assert told["fallbacks"] == [{"speaker": "米拉", "reason": "timeout"}]
    assert (await orchestrate_characters(ctx(None, "zh"), [], brief="x"))["segments"] == [
        {"kind": "narration", "text": FALLBACK_NARRATIONS["zh"]}
    ]


async def test_an_authors_fallbacks_an_answer_without_parts_and_a_stop() -> None:
    agents = Agents({"ok": True, "output": {"segments": []}}, {"ok": False, "error": {"code": "cancelled"}})
    speakers = [
        {"name": "Mira", "characterId": "mira"},
        {"name": "Tobin", "characterId": "tobin"},
        {"name": "Sela", "characterId": "sela"},
    ]
    told = await orchestrate_characters(ctx(agents), speakers, brief="b", fallback_line=lambda s, why: f"{s['name']}: {why}")
    # Mira's empty answer is narrated; the stop at Tobin ends it all: Sela is never asked, nothing is made up for Tobin.
    assert told == {
        "segments": [{"kind": "narration", "text": "Mira: empty"}],
        "delegated": [],
        "cancelled": True,
        "fallbacks": [{"speaker": "Mira", "reason": "empty"}],
    }
    assert len(agents.requests) == 2
    alone = await orchestrate_characters(ctx(Agents()), [], brief="b", fallback_narration="The wind answers.")
    assert alone["segments"] == [{"kind": "narration", "text": "The wind answers."}]
