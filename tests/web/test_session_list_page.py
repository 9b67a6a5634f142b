"""The session list's Rename and Delete, and the token gauge under each turn, in a real browser (headless Chromium,
driven by Playwright) against the web front and the five services (the gateway's slot naming a context window)."""

from __future__ import annotations

import httpx
import pytest

from tests.web import windowed
from tests.web.conftest import shots
from tests.web.test_http_api import sse

pytestmark = pytest.mark.asyncio(loop_scope="session")
# The module's services: the gateway slot names a context window.
windowed_web = windowed.windowed_web


async def started(url: str, title: str, actions: tuple[str, ...] = ()) -> str:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        session = (await client.post("/api/sessions", json={"title": title})).json()["session"]
        for text in actions:
            await sse(client, f"/api/sessions/{session['id']}/actions", {"actions": [{"kind": "act", "text": text}]})
        return session["id"]


async def test_sessions_are_renamed_and_deleted_from_the_list(windowed_web, browser, tmp_path) -> None:
    kept, doomed = await started(windowed_web.url, "Harbour night"), await started(windowed_web.url, "Lost cause")
    page = await browser.new_page(viewport={"width": 1100, "height": 900})
    await page.goto(windowed_web.url)
    await page.evaluate(f"localStorage.setItem('covelSession', '{doomed}')")
    await page.reload()
    rename = page.locator(f"#mine button[data-rename='{kept}']")
    await rename.wait_for()
    assert await rename.get_attribute("aria-label") == "Rename Harbour night"

    await rename.click()
    title = page.locator(f"#rename-{kept}")
    assert await title.input_value() == "Harbour night"
    await title.fill("   ")
    await title.press("Enter")
    await page.locator("form.rename .error", has_text="title: is empty").wait_for()
    await title.fill("The harbour at night")
    await title.press("Enter")
    await page.locator(f"#mine button[data-session='{kept}']", has_text="The harbour at night").wait_for()
    assert await page.evaluate("document.activeElement.dataset.session") == kept, "focus goes back to the renamed session"

    await page.locator(f"#mine button[data-delete='{doomed}']").click()
    dialog = page.locator(f"dialog[data-deleting='{doomed}']")
    await dialog.wait_for()
    assert "Lost cause" in await dialog.inner_text() and "cannot be undone" in await dialog.inner_text()
    await page.screenshot(path=shots(tmp_path) / "delete-dialog.png")
    await page.keyboard.press("Escape")  # kept: nothing deleted
    await dialog.wait_for(state="detached")
    assert await page.locator(f"#mine button[data-session='{doomed}']").count() == 1

    await page.locator(f"#mine button[data-delete='{doomed}']").click()
    await page.locator("dialog button[data-confirm='delete']").click()
    await page.locator(f"#mine button[data-session='{doomed}']").wait_for(state="detached")
    assert await page.evaluate("localStorage.getItem('covelSession')") is None, "the deleted session is not offered to resume"
    assert await page.locator("#resume").is_hidden()
    async with httpx.AsyncClient(base_url=windowed_web.url) as client:
        assert (await client.get(f"/api/sessions/{doomed}")).status_code == 404
        assert (await client.get(f"/api/sessions/{kept}")).json()["session"]["title"] == "The harbour at night"
    await page.close()


async def test_each_turn_shows_the_context_and_tokens_it_used(windowed_web, browser, tmp_path) -> None:
    session_id = await started(windowed_web.url, "Gauged", ("I count the gulls.",))
    page = await browser.new_page(viewport={"width": 1100, "height": 900})
    await page.goto(f"{windowed_web.url}/?session={session_id}")
    first = page.locator("#story .turn-gauge").first
    await first.wait_for()
    assert await first.get_attribute("data-window") == "8192"
    context = int(await first.get_attribute("data-context") or 0)
    assert 0 < context <= 8192 and await first.locator("meter").get_attribute("max") == "8192"
    assert "of 8,192" in await first.inner_text()

    await page.locator("#text").fill("I walk to the pier.")
    await page.locator("#text").press("Enter")
    await page.wait_for_function("!document.getElementById('send').disabled")
    await page.locator("#story .turn-gauge").nth(1).wait_for()
    async with httpx.AsyncClient(base_url=windowed_web.url) as client:
        turns = (await client.get(f"/api/sessions/{session_id}/turns", params={"newestFirst": "true"})).json()["turns"]
    latest = next(turn for turn in turns if turn["origin"] == "TURN_ORIGIN_PLAYER")  # not a detached job's
    shown = page.locator(f"#story .turn-gauge[data-turn='{latest['id']}']")
    assert await shown.get_attribute("data-context") == latest["usage"]["contextTokens"], "the live turn's gauge is its own usage"
    await page.screenshot(path=shots(tmp_path) / "turn-gauge.png", full_page=True)
    await page.close()


async def test_a_resumed_story_of_several_turns_shows_a_gauge_under_each(windowed_web, browser) -> None:
    """More than a few turns to read: one page of turns, not a call each."""
    session_id = await started(windowed_web.url, "Long", ("I wake.", "I dress.", "I go out.", "I find the boat.", "I row."))
    page = await browser.new_page(viewport={"width": 1100, "height": 900})
    calls: list[str] = []
    page.on("request", lambda request: calls.append(request.url) if "/turns" in request.url else None)
    await page.goto(f"{windowed_web.url}/?session={session_id}")
    await page.locator("#story .turn-gauge").nth(4).wait_for()
    turned = {await p.get_attribute("data-turn") for p in await page.locator("#story p.player").all()}
    gauged = {await g.get_attribute("data-turn") for g in await page.locator("#story .turn-gauge").all()}
    assert len(turned) == 5 and turned == gauged, (turned, gauged)
    assert [url for url in calls if "/turns?" in url] and not [url for url in calls if "/turns/" in url], calls
    await page.close()
