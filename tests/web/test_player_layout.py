"""The player page's layout, pictures, sound and markdown in headless Chromium against the web front and the five
services: panels as tabs by their group (a drawer on a phone), a key/value row whose value is a sentence, the
composer always in view, the demo world's backdrop, portraits and music, the media route's refusals, and markdown
that stays safe with hostile input."""

from __future__ import annotations

import httpx
import pytest

from tests.web.conftest import shots

pytestmark = pytest.mark.asyncio(loop_scope="session")

DESKTOP = {"width": 1100, "height": 800}
PHONE = {"width": 375, "height": 740}


async def start_demo(page, url: str, name: str = "Wren") -> None:
    """The demo world from the page, through its setup form, to the opening told."""
    await page.goto(url)
    await page.locator("button[data-world='demo-world']").click()
    await page.locator("#q-protagonist-name").fill(name)
    await page.locator("#q-protagonist-courage").fill("3")
    await page.locator("#q-protagonist-courage").press("Enter")
    await page.locator("#story p", has_text=f"This is where the story of {name} begins.").wait_for()
    await page.wait_for_function("!document.getElementById('send').disabled")


async def play(page, text: str) -> None:
    await page.locator("#text").fill(text)
    await page.locator("#text").press("Enter")
    await page.locator("#story p.player", has_text=text).wait_for()
    await page.wait_for_function(
        "!document.getElementById('send').disabled && document.getElementById('story').getAttribute('aria-busy') === 'false'"
    )


async def test_panels_are_tabs_by_group_and_the_composer_stays_in_view(web, browser, tmp_path) -> None:
    page = await browser.new_page(viewport=DESKTOP)
    await start_demo(page, web.url)
    tabs = page.locator("#panel-tabs [role=tab]")
    await tabs.first.wait_for()
    assert await tabs.all_inner_texts() == ["◷Story", "☺You", "☷People", "❦World"], "groups ordered by their panels' groupOrder"
    assert await page.locator("#panel-tabs [aria-selected=true]").get_attribute("data-group") == "story"
    await page.locator(".panel[data-plugin='world-time']", has_text="Day 1").wait_for()
    assert await page.locator(".panel[data-plugin='char-creator']").is_hidden(), "another group's panels wait behind their tab"

    # The tab list from the keyboard: the arrow keys move between the groups.
    await page.locator("#panel-tabs [aria-selected=true]").focus()
    await page.keyboard.press("ArrowRight")
    assert await page.evaluate("document.activeElement.dataset.group") == "you"
    await page.locator(".panel[data-plugin='char-creator']", has_text="Wren").wait_for()
    assert await page.locator(".panel[data-plugin='world-time']").is_hidden()
    await page.keyboard.press("End")
    assert await page.evaluate("document.activeElement.dataset.group") == "world"

    for action in ("I push open the door of the inn.", "I ask Old Tobin about the lighthouse.", "I light my lantern.", "I wait."):
        await play(page, action)
    composer = await page.locator("#composer").bounding_box()
    assert composer is not None and composer["y"] + composer["height"] <= DESKTOP["height"], (
        f"the composer is in view: {composer}"
    )
    panels = await page.locator("#panels").bounding_box()
    assert panels is not None and panels["height"] <= DESKTOP["height"], "the panel column is no taller than the window"
    await page.screenshot(path=shots(tmp_path) / "panels-desktop.png")

    # A stat whose value is a sentence: the value gets its own line under the label.
    sentence = "The lamp room door is bolted from the inside, and nobody has seen the keeper since Tuesday."
    long_row = page.locator(".panel[data-panel='notes'] .stat.long")
    for _ in range(5):  # the last turn's own panel refresh (afterTurn, not awaited) may lay the panels out again after this
        await page.evaluate(
            """(sentence) => layoutPanels([{pluginId: 'probe', id: 'notes', group: 'story', label: 'Notes', location: 'UI_SLOT_RIGHT',
            spec: {view: {type: 'stack', children: [{type: 'stat', label: 'Door', value: sentence}, {type: 'stat', label: 'Day', value: '2'}]}}}])""",
            sentence,
        )
        await page.wait_for_timeout(500)
        if await long_row.count() == 1:
            break
    assert await long_row.count() == 1, "only the long value leaves its row"
    label = await long_row.locator("span").bounding_box()
    value = await long_row.locator("strong").bounding_box()
    assert label and value and value["y"] >= label["y"] + label["height"] - 1 and value["width"] > label["width"], (label, value)
    await page.close()


async def test_a_phone_gets_the_panels_in_a_drawer(web, browser, tmp_path) -> None:
    page = await browser.new_page(viewport=PHONE)
    await start_demo(page, web.url, "Ash")
    opener = page.locator("#panels-open")
    await opener.wait_for()
    assert await page.locator("#panels").is_hidden(), "the drawer is closed: the story has the screen"
    await play(page, "I look around the harbour.")
    composer = await page.locator("#composer").bounding_box()
    assert (
        composer is not None
        and composer["y"] + composer["height"] <= PHONE["height"]
        and composer["x"] + composer["width"] <= PHONE["width"]
    )
    await opener.click()
    assert await opener.get_attribute("aria-expanded") == "true"
    await page.locator(".panel[data-plugin='world-time']").wait_for()
    await page.wait_for_function("getComputedStyle(document.getElementById('panels')).transform === 'none'")
    drawer = await page.locator("#panels").bounding_box()
    assert drawer is not None and drawer["x"] >= 0 and drawer["x"] + drawer["width"] <= PHONE["width"] + 1, drawer
    assert await page.evaluate("document.activeElement.getAttribute('role')") == "tab", "the drawer takes the focus"
    await page.screenshot(path=shots(tmp_path) / "panels-phone.png")
    await page.keyboard.press("Escape")
    await page.locator("#panels").wait_for(state="hidden")
    assert await page.evaluate("document.activeElement.id") == "panels-open", "closing gives the focus back"
    await page.close()


async def test_the_demo_world_shows_its_backdrop_and_portraits_and_plays_its_music(web, browser, tmp_path) -> None:
    page = await browser.new_page(viewport=DESKTOP)
    await start_demo(page, web.url, "Tam")
    await play(page, "I sit down by the fire in the inn.")
    backdrop = page.locator("#backdrop img")
    await backdrop.wait_for()
    await page.wait_for_function("document.querySelector('#backdrop img').naturalWidth > 0")
    assert (await backdrop.get_attribute("src") or "").startswith("blob:"), "fetched with the player's token, shown from a blob"
    await page.locator("#tab-people").click()
    portrait = page.locator(".panel[data-plugin='character-blueprint'] img.media.portrait").first
    await portrait.wait_for()
    await page.wait_for_function("[...document.querySelectorAll('img.media.portrait')].some((img) => img.naturalWidth > 0)")
    assert await portrait.get_attribute("alt"), "a portrait says whose it is"

    await page.locator("#tab-story").click()
    track = page.locator(".panel[data-plugin='soundtrack'] button.track").first
    await track.wait_for()
    assert (await track.get_attribute("aria-label") or "").startswith("Play music: "), "the control says what it plays"
    await track.click()
    await page.wait_for_function("covelMedia.music.audio && !covelMedia.music.audio.paused")
    header = page.locator("#music")
    await header.filter(has_text="♪").wait_for()
    assert await header.get_attribute("aria-pressed") == "true"
    await page.screenshot(path=shots(tmp_path) / "media.png")
    await header.click()
    await page.wait_for_function("covelMedia.music.audio.paused")
    # The controls follow the audio's pause event, a moment after it paused.
    await page.wait_for_function("document.querySelector(\".panel[data-plugin='soundtrack'] button.track\").getAttribute('aria-pressed') === 'false'")
    assert await header.get_attribute("aria-pressed") == "false"
    await page.close()


async def test_the_media_route_serves_declared_files_only(web) -> None:
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as client:
        session = (await client.post("/api/sessions", json={"worldId": "demo-world"})).json()["session"]
        media = f"/api/sessions/{session['id']}/media"
        image = await client.get(media, params={"path": "backdrops/inn.png"})
        assert image.status_code == 200 and image.headers["content-type"] == "image/png" and image.content.startswith(b"\x89PNG")
        assert image.headers["x-content-type-options"] == "nosniff" and "sandbox" in image.headers["content-security-policy"]
        sound = await client.get(media, params={"path": "music/tide.wav"})
        assert sound.status_code == 200 and sound.headers["content-type"] == "audio/wav" and sound.content.startswith(b"RIFF")

        climbing = await client.get(media, params={"path": "backdrops/../../../etc/passwd"})
        assert climbing.status_code == 400 and climbing.json()["fieldViolations"][0]["field"] == "path", climbing.text
        absolute = await client.get(media, params={"path": "/etc/passwd"})
        assert absolute.status_code == 400
        for undeclared in ("world.yaml", "characters.yaml", "data/secrets.yaml", "media/nobody.png"):
            refused = await client.get(media, params={"path": undeclared})
            assert refused.status_code == 404 and refused.json()["reason"] == "MEDIA_NOT_DECLARED", (undeclared, refused.text)
        not_running = await client.get(media, params={"path": "ui/page.html", "pluginId": "no-such-plugin"})
        assert not_running.status_code == 404 and not_running.json()["reason"] == "PLUGIN_NOT_ACTIVE"
        no_webview = await client.get(media, params={"path": "ui/right.json", "pluginId": "inventory"})
        assert no_webview.status_code == 404 and no_webview.json()["reason"] == "MEDIA_NOT_DECLARED", (
            "a panel spec is no webview file"
        )
        unknown = await client.get(media, params={"file": "x"})
        assert unknown.status_code == 400 and unknown.json()["fieldViolations"][0]["field"] == "file"
        stranger = await client.get(
            "/api/sessions/00000000-0000-0000-0000-000000000000/media", params={"path": "backdrops/inn.png"}
        )
        assert stranger.status_code == 404 and stranger.json()["reason"] == "SESSION_NOT_FOUND"


HOSTILE = {
    "<script>window.pwned = 1</script>": None,
    '<img src=x onerror="window.pwned = 1">': None,
    "[click](javascript:window.pwned=1)": None,
    "[click](JaVaScRiPt:alert(1))": None,
    "[data](data:text/html,<script>alert(1)</script>)": None,
    "**<b onmouseover=alert(1)>bold</b>**": "strong",
    "`<iframe src=//evil>`": "code",
    '[x](https://example.com/"onmouseover="alert(1))': None,
}


async def test_markdown_in_the_story_is_drawn_and_hostile_input_stays_text(web, browser) -> None:
    page = await browser.new_page()
    await page.goto(web.url)
    await page.locator("#lang").wait_for()
    await page.wait_for_function("typeof storyInline === 'function'")
    drawn = await page.evaluate("""() => { const p = document.createElement('p');
        p.append(...storyInline('The **lamp** is *dark*, said _Sela_; see `log_book` or [the chart](https://example.com/chart) ~~now~~.\\nNext line. snake_case_name'));
        return p.innerHTML; }""")
    assert drawn == (
        "The <strong>lamp</strong> is <em>dark</em>, said <em>Sela</em>; see <code>log_book</code> or "
        '<a href="https://example.com/chart" rel="noopener noreferrer nofollow" target="_blank">the chart</a> <del>now</del>.'
        "<br>Next line. snake_case_name"
    ), drawn
    for text, tag in HOSTILE.items():
        result = await page.evaluate(
            """(text) => { const p = document.createElement('p'); p.append(...storyInline(text));
            document.body.append(p);
            const tags = [...p.querySelectorAll('*')].map((node) => node.tagName.toLowerCase());
            const hrefs = [...p.querySelectorAll('a')].map((a) => a.getAttribute('href'));
            const handlers = [...p.querySelectorAll('*')].flatMap((node) => [...node.attributes].map((a) => a.name)).filter((n) => n.startsWith('on'));
            p.remove(); return {tags, hrefs, handlers, text: p.textContent}; }""",
            text,
        )
        assert result["tags"] == ([tag] if tag else []), (text, result)
        assert not result["hrefs"] and not result["handlers"], (text, result)
        assert "<" not in text or "<" in result["text"], f"markup is shown as the text it is: {result}"
    assert await page.evaluate("window.pwned") is None
    await page.close()
