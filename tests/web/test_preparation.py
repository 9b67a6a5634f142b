"""The session's preparation (issue 41 item 3) over HTTP and in a real browser (headless Chromium, Playwright),
against the web front and the five services: a world whose plan has a plugin waiting for a community provider,
plugin cards grouped by their cost:* tag with author, license and links, a task that will not run and a field that
was not read, each with its reason; packs, a change by hand, the minimal set, no narrator, and a link's dialog."""

from __future__ import annotations

import httpx
import pytest
import pytest_asyncio

from shared.settings import REPO_ROOT
from tests.e2e.conftest import running_services
from tests.web.conftest import running_web, shots

pytestmark = pytest.mark.asyncio(loop_scope="session")

WORLD = """\
name: Lanterns
description: A night market where every stall hangs a light.
author: {name: Ada Lovelace, url: "https://ada.example.org/", links: [{label: Notes, url: "https://bücher.example/lanterns"}]}
license: CC-BY-4.0
homepage: https://lanterns.example.org/
pluginPolicy: {preset: quiet, plus: [moth]}
"""
# moth (an operator's plugin) needs light@1, which only lantern (a community plugin) provides.
MOTH = "---\ndisplayName: Moth\ndescription: Circles whatever light there is.\nrequires: [light@1]\nruntime:\n  schedule: {stage: post-turn}\n---\nSay a moth circles.\n"
LANTERN = """\
---
displayName: Lantern
description: Lights the way.
tags: [mode:night]
provides: [light@1]
license: MIT
author: {name: Ada, links: [{label: Code, url: "https://bücher.example/lantern"}]}
flavour: smoky
---
"""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def web(tmp_path_factory):
    root = tmp_path_factory.mktemp("prepare")
    for folder, files in {
        "worlds/lanterns": {"world.yaml": WORLD},
        "own/moth": {"PLUGIN.md": MOTH},
        "community/lantern": {"PLUGIN.md": LANTERN, "runtimes/notes/prompt.txt": "A runtime without its RUNTIME.md."},
    }.items():
        for name, text in files.items():
            (root / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (root / folder / name).write_text(text, encoding="utf-8")
    env = {"COVEL_WORLD_DIRS": str(root / "worlds"), "COVEL_BUILTIN_PLUGIN_DIRS": f"{REPO_ROOT / 'plugins'},{root / 'own'}"}
    async with (
        running_services(root / "data", plugin_dirs=(root / "own", root / "community"), extra_env=env) as group,
        running_web(group) as front,
    ):
        yield front


async def test_the_plan_carries_plugin_cards_and_a_set_changed_by_hand(web) -> None:
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as client:
        plan = (await client.get("/api/worlds/lanterns/plan")).json()["plan"]
        cards = {card["id"]: card for card in plan["plugins"]}
        lantern, moth = cards["lantern"], cards["moth"]
        assert (lantern["source"], moth["source"]) == ("community", "builtin")
        assert lantern["author"]["links"][0]["url"] == "https://bücher.example/lantern" and lantern["license"] == "MIT"
        assert [(d["code"], d["file"], d["fieldPath"]) for d in lantern["ignored"]] == [("unknown-field", "PLUGIN.md", "flavour")]
        assert [d["code"] for d in lantern["unrunnable"]] == ["runtime-manifest-missing"]
        assert cards["narrator"]["story"] is True and "cost:llm" in moth["tags"]
        assert plan["resolution"]["autoAdded"] == ["lantern"] and "moth" in plan["resolution"]["active"], (
            "its provider joins by itself"
        )
        assert plan["pack"]["id"] == "quiet"

        params = {"custom": "true", "requestedPlugins": "moth", "excludedPlugins": "lantern"}
        dropped = (await client.get("/api/worlds/lanterns/plan", params=params)).json()["plan"]
        waiting = [u for u in dropped["resolution"].get("unavailable", []) if u["pluginId"] == "moth"]
        assert waiting and waiting[0]["contract"] == "light@1", dropped["resolution"]

        by_hand = (
            await client.get("/api/worlds/lanterns/plan", params={"custom": "true", "excludedPlugins": "narrator"})
        ).json()["plan"]
        assert by_hand["pack"]["id"] == "quiet", "the pack it came from"
        assert by_hand.get("defaultPluginIds", []) == [] and "narrator" not in by_hand["resolution"]["active"]
        refused = await client.get("/api/worlds/lanterns/plan", params={"packId": "nope"})
        assert refused.status_code == 400 and refused.json()["fieldViolations"][0]["field"] == "pack_id"


async def test_a_player_prepares_a_session_and_starts_it(web, browser, tmp_path) -> None:
    page = await browser.new_page(viewport={"width": 1100, "height": 1000})
    await page.goto(web.url)
    prepare = page.locator("#worlds button[data-prepare='lanterns']")
    await prepare.wait_for()
    assert await prepare.get_attribute("aria-label") == "Prepare a session in Lanterns"
    await prepare.click()
    await page.locator("#prepare-title").wait_for()
    assert await page.locator("#prepare button[data-pack='quiet']").get_attribute("aria-pressed") == "true"
    assert "null" not in await page.locator("#prepare").inner_text()

    llm = page.locator("#prepare section[data-group='cost:llm']")
    assert await llm.locator("h3").inner_text() == "Calls a model"
    assert (
        await llm.locator("[data-plugin-card='narrator']").count() == 1
        and await llm.locator("[data-plugin-card='moth']").count() == 1
    )
    shown = await page.evaluate(
        "[...document.querySelectorAll('#prepare [data-plugin-card]')].map((card) => card.dataset.pluginCard)"
    )
    assert len(shown) == len(set(shown)) and {"lantern", "moth", "narrator", "inventory"} <= set(shown), "each plugin once"
    lantern = page.locator("#prepare [data-plugin-card='lantern']")
    await lantern.locator("input[data-toggle='lantern']").uncheck()
    waiting = page.locator("#prepare li[data-unavailable='moth']")
    await waiting.wait_for()
    assert "needs light@1" in await waiting.inner_text()
    await waiting.locator("button[data-open-plugin='lantern']").click()
    assert "opened" in (await lantern.get_attribute("class") or "")
    assert await page.evaluate("document.activeElement.dataset.toggle") == "lantern"
    await page.keyboard.press("Space")
    await waiting.wait_for(state="detached")
    assert "Ignored in its manifest" in await lantern.inner_text() and "Tasks that will not run" in await lantern.inner_text()
    await page.screenshot(path=shots(tmp_path) / "prepare.png", full_page=True)

    await lantern.locator("button[data-reason='lantern:unknown-field:flavour']").click()
    reason = page.locator("dialog.reason-dialog")
    text = await reason.inner_text()
    assert "PLUGIN.md" in text and "flavour" in text and "ignored" in text and "/tmp" not in text, text
    await page.keyboard.press("Escape")
    await reason.wait_for(state="detached")

    await lantern.locator("button[data-link='https://bücher.example/lantern']").click()
    link = page.locator("dialog.link-dialog")
    assert await link.locator(".link-domain").inner_text() == "xn--bcher-kva.example", "the domain as punycode"
    assert await link.locator(".link-url").inner_text() == "https://bücher.example/lantern"
    await link.locator("button[value='cancel']").click()
    await link.wait_for(state="detached")
    world = page.locator("#prepare [data-world-card='lanterns']")
    assert "Ada Lovelace" in await world.inner_text() and "CC-BY-4.0" in await world.inner_text()

    await lantern.locator("input[data-approve='lantern']").check()
    await page.locator("#prepare input[data-approve='lantern']:checked").wait_for()
    assert "runs" in await page.locator("#prepare [data-plugin-card='moth'] .state").inner_text()

    await page.locator("#prepare input[data-toggle='narrator']").uncheck()
    await page.locator("#prepare .no-story").wait_for()
    assert await page.locator("#prepare .no-story button[data-open-plugin='narrator']").count() == 1, "narrators listed"
    assert await page.locator("#prepare button[data-pack='quiet']").get_attribute("aria-pressed") == "false", (
        "a change by hand clears the pack"
    )
    assert await page.locator("#prepare .by-hand").get_attribute("data-from-pack") == "quiet", "and remembers where it came from"
    await page.locator("#prepare #minimal").click()
    await page.locator("#prepare .no-story").wait_for(state="detached")
    assert not await page.locator("#prepare input[data-toggle='moth']").is_checked(), "the minimal set: the core plugins alone"

    await page.locator("#prepare button[data-pack='quiet']").click()
    await page.locator("#prepare button[data-pack='quiet'][aria-pressed='true']").wait_for()
    await page.locator("#prepare input[data-toggle='guide']").check()
    await page.locator("#prepare-start").click()
    await page.wait_for_function("state.session && state.session.worldId === 'lanterns'")
    session = await page.evaluate("state.session")
    assert "guide" in session["requestedPlugins"] and "lantern" in session["approvedPlugins"], session
    assert await page.locator("#prepare").is_hidden()
    await page.close()
