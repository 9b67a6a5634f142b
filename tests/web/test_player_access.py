"""Keyboard-only play and labelled controls on the player page, in headless Chromium against the web front and the
five services: a player who never touches the mouse picks the demo world, fills its setup form and plays a turn;
every control on the page has a name a screen reader can say."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.asyncio(loop_scope="session")

# A control's accessible name, as far as this page gives one: aria-label, aria-labelledby, its <label>, its text, title.
NAMELESS = """() => [...document.querySelectorAll('button, input, select, textarea, iframe, audio, [role=tab]')]
    .filter((node) => node.getClientRects().length > 0 || node.closest('#panels'))
    .filter((node) => !(node.getAttribute('aria-label') || '').trim()
        && !(node.getAttribute('aria-labelledby') || '').split(' ').some((id) => id && document.getElementById(id) && document.getElementById(id).textContent.trim())
        && !(node.labels && [...node.labels].some((label) => label.textContent.trim()))
        && !(['BUTTON', 'A'].includes(node.tagName) && node.textContent.trim())
        && !(node.getAttribute('title') || '').trim())
    .map((node) => node.outerHTML.slice(0, 120))"""


async def tab_to(page, condition: str, limit: int = 60) -> None:
    """Press Tab until the focused element meets `condition` (JS, `el` the active element)."""
    for _ in range(limit):
        if await page.evaluate(f"(() => {{ const el = document.activeElement; return !!el && ({condition}); }})()"):
            return
        await page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {condition}; at {await page.evaluate('document.activeElement.outerHTML')}")


async def test_a_turn_is_played_with_the_keyboard_only(web, browser) -> None:
    page = await browser.new_page(viewport={"width": 1100, "height": 800})
    await page.goto(web.url)
    await page.locator("button[data-world='demo-world']").wait_for()
    await tab_to(page, "el.dataset.world === 'demo-world'")
    await page.keyboard.press("Enter")
    await page.locator("#q-protagonist-name").wait_for()
    assert await page.evaluate("document.activeElement.id") == "q-protagonist-name", "the form takes the focus"
    await page.keyboard.press("Control+A")
    await page.keyboard.type("Wren")
    await tab_to(page, "el.id === 'q-protagonist-courage'")
    await page.keyboard.press("Control+A")
    await page.keyboard.type("4")
    await page.keyboard.press("Enter")
    await page.locator("#story p", has_text="This is where the story of Wren begins.").wait_for()
    await page.wait_for_function("!document.getElementById('text').disabled")
    await tab_to(page, "el.id === 'text'")
    await page.keyboard.type("I push open the door of the inn.")
    await page.keyboard.press("Enter")
    await page.locator("#story p.player", has_text="I push open the door of the inn.").wait_for()
    await page.wait_for_function("!document.getElementById('send').disabled")
    assert await page.locator("#story p:not(.player):not(.cue)").count() >= 2, "the turn was told"

    # The panels' tabs and the story's moves are reached the same way.
    await tab_to(page, "el.getAttribute('role') === 'tab'")
    await page.keyboard.press("ArrowRight")
    await page.locator(".panel[data-plugin='char-creator']", has_text="Wren").wait_for()
    await tab_to(page, "el.id === 'regenerate'", limit=120)
    assert await page.evaluate(NAMELESS) == [], "every control has a name"
    await page.close()


async def test_every_control_is_labelled_on_the_start_screen_and_a_phone(web, browser) -> None:
    for viewport in ({"width": 1100, "height": 800}, {"width": 375, "height": 740}):
        page = await browser.new_page(viewport=viewport)
        await page.goto(web.url)
        await page.locator("button[data-world='demo-world']").wait_for()
        assert await page.evaluate(NAMELESS) == []
        await page.evaluate("api('POST', '/api/sessions', {worldId: 'demo-world'}).then(({session}) => openSession(session))")
        await page.locator("#q-protagonist-name").wait_for()
        assert await page.evaluate(NAMELESS) == []
        await page.close()
