"""The player page in a real browser (headless Chromium, driven by Playwright) against the web front and the five
services: a session through the setup form (a refused answer shown next to its field), the opening streamed as
it is told, three turns, an action kind with fields, the panels, a reload that resumes, a narrow screen, and the
line shown when the services cannot be reached. Screenshots of the main screens go to the test's output folder."""

from __future__ import annotations

import httpx
import pytest
import pytest_asyncio

from tests.web.conftest import shots

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_player_sets_up_and_plays_the_demo_world_with_the_keyboard(web, browser, tmp_path) -> None:
    page = await browser.new_page(viewport={"width": 1100, "height": 900})
    await page.goto(web.url)
    saltmere = page.locator("button[data-world='demo-world']")
    await saltmere.focus()
    await page.keyboard.press("Enter")

    # The setup's character form, asked by the turn the page started with `advance`.
    name = page.locator("#q-protagonist-name")
    await name.wait_for()
    assert await name.input_value() == "The traveller", "the world's preset is the default"
    assert await page.locator("#text").is_disabled() and await page.locator("#send").is_disabled(), "the composer is off during the form"
    await page.screenshot(path=shots(tmp_path) / "setup-form.png", full_page=True)
    await name.fill("Wren")
    await page.locator("#q-protagonist-courage").fill("9")
    await page.keyboard.press("Enter")
    refused = page.locator("#q-protagonist-courage-error")
    await refused.filter(has_text="greater than the maximum of 5").wait_for()

    await page.locator("#q-protagonist-courage").fill("4")
    await page.locator("#q-protagonist-courage").press("Enter")
    await page.locator("#story p", has_text="This is where the story of Wren begins.").wait_for()
    await page.locator("#q-protagonist").wait_for(state="detached")  # an answered form goes away
    await page.wait_for_function("!document.getElementById('text').disabled")
    assert await page.locator("#kind").input_value() == "act", "plain text acts, as in `covel play`"
    await page.locator("#tab-you").click()  # the character sheet is in the "You" group's tab
    await page.locator(".panel[data-plugin='char-creator']", has_text="Wren").wait_for()
    await page.locator("#tab-story").click()

    for number, action in enumerate(("I push open the door of the inn.", "I ask Old Tobin about the lighthouse.",
                                     "I light my lantern."), start=1):
        before = await page.locator("#story p").count()
        await page.locator("#text").fill(action)
        await page.locator("#text").press("Enter")
        await page.locator("#story p.player", has_text=action).wait_for()
        await page.locator("#suggestions button").first.wait_for()
        await page.wait_for_function(f"document.querySelectorAll('#story p').length > {before + 1}")
        await page.wait_for_function("!document.getElementById('send').disabled")
        assert number <= 3
    await page.locator(".panel[data-plugin='world-time']", has_text="Day 1").wait_for()
    assert await page.locator("#story p.cue").count() >= 3, "each story's cues: scene, who is present, mood"
    await page.screenshot(path=shots(tmp_path) / "story.png", full_page=True)

    # A plugin action kind with fields: demo-world/ask {topic}.
    await page.locator("#kind").select_option("demo-world/ask")
    topic = page.locator("#field-topic")
    await topic.wait_for()
    await topic.fill("the lens")
    await page.locator("#text").fill("Sela")
    await page.locator("#send").click()
    await page.wait_for_function("!document.getElementById('send').disabled")
    assert not await page.locator("#composer-error").text_content()
    asked = await page.locator("#story p.player").last.inner_text()
    assert asked.startswith("Sela (topic: the lens) · ") and "ask" in asked.lower(), "a kind's fields and label, live as resumed"

    # A reload resumes the session with its story, from the last one kept or the list of the caller's sessions.
    session_id = await page.evaluate("state.session.id")
    await page.reload()
    await page.locator("#resume").click()
    await page.locator("#story p", has_text="This is where the story of Wren begins.").wait_for()
    resumed = await page.locator("#story p.player").all_inner_texts()
    assert not [line for line in resumed if "【" in line or "courage:" in line], f"internal lines are not story: {resumed}"
    assert any(line.startswith("Sela (topic: the lens)") and "ask" in line.lower() for line in resumed), resumed
    await page.reload()
    await page.locator(f"#mine button[data-session='{session_id}']").click()
    await page.locator("#story p", has_text="This is where the story of Wren begins.").wait_for()
    await page.close()


async def test_a_narrow_screen_and_a_service_that_cannot_be_reached(web, browser, tmp_path) -> None:
    page = await browser.new_page(viewport={"width": 375, "height": 740})
    await page.goto(web.url)
    await page.locator("button[data-world='demo-world']").click()
    await page.locator("#q-protagonist-name").wait_for()
    box = await page.locator("#composer").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, "the composer fits a phone's width"
    await page.screenshot(path=shots(tmp_path) / "narrow.png", full_page=True)

    # The web front's API cannot be reached: one clear line says so.
    await page.route("**/api/**", lambda route: route.abort())
    await page.locator("#q-protagonist-name").fill("Ash")
    await page.locator("#q-protagonist-name").press("Enter")
    # The page retries for 30 s ("trying again…") before it says the service cannot be reached: the
    # wait allows that and more than the default 30 s, which a loaded machine overran.
    await page.locator("#status.down", has_text="cannot be reached").wait_for(timeout=90_000)
    await page.close()


async def test_the_page_speaks_chinese(web, browser) -> None:
    page = await browser.new_page()
    await page.goto(web.url)
    await page.locator("#lang").click()
    await page.locator("#start-title", has_text="选择一个世界").wait_for()
    assert await page.evaluate("document.documentElement.lang") == "zh"
    await page.close()


async def test_light_and_dark_themes_and_a_cjk_font_stack(web, browser, tmp_path) -> None:
    """The system's dark preference is followed until the toggle chooses; the choice outlives a reload."""
    page = await browser.new_page(color_scheme="dark")
    await page.goto(web.url)
    background = "getComputedStyle(document.body).backgroundColor"
    await page.locator("#theme[aria-pressed='true']").wait_for()
    assert await page.evaluate(background) == "rgb(27, 26, 23)", "dark, as the system prefers"
    await page.screenshot(path=shots(tmp_path) / "dark.png", full_page=True)
    await page.locator("#theme").click()
    assert await page.evaluate(background) == "rgb(247, 243, 234)" and await page.locator("#theme").get_attribute("aria-pressed") == "false"
    await page.reload()
    await page.locator("#theme[aria-pressed='false']").wait_for()
    assert await page.evaluate(background) == "rgb(247, 243, 234)", "the chosen light theme is kept"
    await page.locator("#lang").click()
    await page.locator("#start-title", has_text="选择一个世界").wait_for()
    font = await page.evaluate("getComputedStyle(document.body).fontFamily")
    assert font.startswith('"Noto Serif CJK SC"'), f"Chinese reads with a CJK font first: {font}"
    await page.evaluate("localStorage.clear()")
    await page.close()


async def test_the_page_has_a_favicon(web, browser) -> None:
    page = await browser.new_page()
    await page.goto(web.url)
    href = await page.evaluate("document.querySelector('link[rel=icon]').href")
    async with httpx.AsyncClient() as client:
        icon = await client.get(href)
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml"), icon.headers
    assert icon.text.lstrip().startswith("<svg")
    await page.close()


async def test_notices_expire_and_can_be_dismissed(web, browser) -> None:
    page = await browser.new_page()
    await page.goto(web.url)
    await page.locator("#lang").wait_for()
    await page.evaluate("api('POST', '/api/sessions', {}).then(({session}) => openSession(session))")
    await page.locator("#text").wait_for()
    # A refused move (a turn that is not the session's) is an error notice from the API; it stays 20 s by default.
    assert await page.evaluate("state.noticeMs.error") == 20000
    await page.evaluate("state.noticeMs.error = 600; move('rewind', {turnId: 'no-such-turn'})")
    refused = page.locator("#notices .notice.error")
    await refused.wait_for()
    await refused.wait_for(state="detached")  # gone by itself
    await page.evaluate("state.noticeMs.error = 600000; move('rewind', {turnId: 'no-such-turn'})")
    await refused.wait_for()
    await refused.locator("button.dismiss").click()
    await refused.wait_for(state="detached")
    await page.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def slow_web(tmp_path_factory):
    """A web front whose model streams slowly (50 ms a chunk): a turn can be watched, and stopped, as it is told."""
    from tests.e2e.conftest import running_services
    from tests.web.conftest import running_web

    env = {"COVEL_GATEWAY_SCRIPTED_CHUNK_DELAY_MS": "50"}
    async with running_services(tmp_path_factory.mktemp("slow-web"), extra_env=env) as group, running_web(group) as front:
        yield front


async def test_a_turn_is_read_as_it_streams_and_stop_ends_it(slow_web, browser) -> None:
    page = await browser.new_page()
    await page.goto(slow_web.url)
    await page.locator("#lang").wait_for()
    # A session without a world: no setup form, the first action is a story turn.
    await page.evaluate("api('POST', '/api/sessions', {}).then(({session}) => openSession(session))")
    await page.locator("#text").fill("I walk down to the harbour and wait for the boats.")
    await page.locator("#text").press("Enter")
    live = page.locator("#story p.live").first
    await live.wait_for()
    assert await page.locator("#send").is_disabled(), "the story shows while its turn still runs"
    status = page.locator("#status.busy")
    assert await status.text_content() == "Telling the story…", "the status says a turn is being told"
    assert await page.locator("#story").get_attribute("aria-busy") == "true"
    await page.locator("#cancel").click()
    await page.wait_for_function("!document.getElementById('send').disabled")
    assert await page.locator("#cancel").is_disabled()
    assert await page.locator("#status").text_content() == "Connected" and not await status.count()
    stopped = await page.locator("#notices .notice.error").all_text_contents()
    assert stopped and "cancel" in stopped[-1].lower(), stopped
    await page.close()


async def test_a_confirmation_is_answered_from_the_keyboard(web, browser) -> None:
    page = await browser.new_page()
    await page.goto(web.url)
    await page.locator("#lang").wait_for()
    await page.evaluate("api('POST', '/api/sessions', {requestedPlugins: ['suspend-probe'], approvedPlugins: ['suspend-probe']})"
                        ".then(({session}) => openSession(session))")
    await page.locator("#text").wait_for()
    # suspend-probe/confirmer (a manual runtime) suspends on "Rest here?": the page shows it as it streams.
    await page.evaluate("stream(`/api/sessions/${state.session.id}/manual/suspend-probe/confirmer`, {}, turnHandler())")
    question = page.locator("#q-rest-here")
    await question.filter(has_text="Rest here?").wait_for()
    assert await page.evaluate("document.activeElement.textContent") == "Yes", "the question takes the focus"
    await page.keyboard.press("Enter")
    await question.wait_for(state="detached")
    session_id = await page.evaluate("state.session.id")
    async with httpx.AsyncClient(base_url=web.url) as client:
        data = (await client.get(f"/api/sessions/{session_id}/interactions", params={"includeAnswered": "true"})).json()
    assert [(r["interaction"]["id"], r["status"]) for r in data["interactions"]] == [("rest-here", "INTERACTION_STATUS_ANSWERED")]
    await page.close()


async def test_the_story_moves_on_the_page(web, browser, tmp_path) -> None:
    """Regenerate with ‹ 2/2 › version arrows, edit, continue, delete, rewind and branch, as buttons on the story."""
    page = await browser.new_page(viewport={"width": 1100, "height": 900})
    await page.goto(web.url)
    await page.locator("#lang").wait_for()
    await page.evaluate("api('POST', '/api/sessions', {}).then(({session}) => openSession(session))")
    await page.locator("#text").wait_for()
    for action in ("I knock.", "I enter."):
        await page.locator("#text").fill(action)
        await page.locator("#text").press("Enter")
        await page.locator("#story p.player", has_text=action).wait_for()
        await page.wait_for_function("!document.getElementById('send').disabled")
    await page.locator("#moves").wait_for()
    first_turn = await page.locator("#story p.player", has_text="I knock.").get_attribute("data-turn")

    await page.locator("#regenerate").click()
    shown = page.locator("#version-shown")
    await shown.filter(has_text="2/2").wait_for()
    await page.locator("#version-prev").click()
    await shown.filter(has_text="1/2").wait_for()
    assert await page.locator("#version-prev").is_disabled()

    await page.locator("#edit").click()
    assert await page.locator("#text").input_value() == "I enter.", "the last thing the player did, to edit"
    await page.locator("#text").fill("I whisper.")
    await page.locator("#text").press("Enter")
    await shown.filter(has_text="3/3").wait_for()
    await page.locator("#story p.player", has_text="I whisper.").wait_for()
    assert await page.locator("#story p.player", has_text="I enter.").count() == 0, "the edited message replaced it"
    await page.screenshot(path=shots(tmp_path) / "story-moves.png", full_page=True)

    await page.locator("#continue").click()
    await page.wait_for_function("!document.getElementById('send').disabled")
    await page.locator("#delete").click()
    await page.wait_for_function("!document.getElementById('send').disabled")

    await page.locator(f"#story button[data-rewind='{first_turn}']").click()
    await page.locator("#story p.player", has_text="I whisper.").wait_for(state="detached")
    said = [text.split("Rewind")[0].strip() for text in await page.locator("#story p.player").all_inner_texts()]
    assert said[-1] == "I knock." and not {"I enter.", "I whisper."} & set(said), said

    session_id = await page.evaluate("state.session.id")
    await page.locator(f"#story button[data-branch='{first_turn}']").click()
    await page.wait_for_function(f"state.session.id !== '{session_id}'")
    assert await page.evaluate("localStorage.getItem('covelSession')") != session_id, "the page plays the branch now"
    await page.locator("#story p.player", has_text="I knock.").wait_for()
    await page.close()
