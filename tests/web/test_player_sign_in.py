"""Signing in on the player page, in headless Chromium, against the web front and five services that ask for a
bearer token (COVEL_API_TOKEN): the API's 401 brings the token form (no retry loop), a refused token is said so,
the right one is kept in the browser and plays, and signing out forgets it."""

from __future__ import annotations

import pytest
import pytest_asyncio

from tests.e2e.conftest import running_services
from tests.web.conftest import running_web, shots

pytestmark = pytest.mark.asyncio(loop_scope="session")
TOKEN = "page-sign-in-test-token"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def signed_web(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("signed-web"), extra_env={"COVEL_API_TOKEN": TOKEN}) as group, \
            running_web(group) as front:
        yield front


async def test_a_player_signs_in_with_a_token_plays_and_signs_out(signed_web, browser, tmp_path) -> None:
    page = await browser.new_page(viewport={"width": 1100, "height": 900})
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "/api/worlds" in request.url else None)
    await page.goto(signed_web.url)

    form = page.locator("#signin")
    await form.wait_for()
    assert await page.locator("#status").text_content() == "Sign in to play"
    assert await page.locator("#start").is_hidden() and await page.locator("#signout").is_hidden()
    assert await page.evaluate("document.activeElement.id") == "token", "the token field takes the focus"
    await page.screenshot(path=shots(tmp_path) / "sign-in.png", full_page=True)
    # The page used to retry every 3 s without a token; now it waits for one. (A page that still polled would
    # have asked again within this wait; a loaded machine can only make it ask less.)
    await page.wait_for_timeout(3500)
    assert len(asked) == 1, asked

    # A wrong token: the scheduler's refusal is shown, the form stays.
    await page.locator("#token").fill("not-the-token")
    await page.locator("#token").press("Enter")
    refusal = page.locator("#signin-error")
    await page.wait_for_function("document.getElementById('signin-error').textContent.length > 0")
    assert await form.is_visible() and "token" in (await refusal.text_content() or "").lower()

    # The right one: kept in the browser, the worlds listed, and a session plays (its setup form streamed).
    await page.locator("#token").fill(TOKEN)
    await page.locator("#token").press("Enter")
    await page.locator("button[data-world='demo-world']").click()
    await page.locator("#q-protagonist-name").wait_for()
    assert await form.is_hidden()
    assert await page.evaluate("localStorage.getItem('covelToken')") == TOKEN
    await page.reload()
    await page.locator("button[data-world='demo-world']").wait_for()  # the kept token signs in again

    await page.locator("#signout").click()
    await form.wait_for()
    assert await page.evaluate("localStorage.getItem('covelToken')") is None
    assert await page.locator("#signout").is_hidden()
    await page.close()
