"""Two players in one story on the player page (issue 41 item 5), two headless Chromium browsers signed in as two
users of a users file: the owner invites the other to a seat, the invited player opens the link and joins, and each
sees the other's actions and story as they are played (WatchSession)."""

from __future__ import annotations

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from tests.e2e.conftest import minimal_session, running_services
from tests.web.conftest import running_web, shots

pytestmark = pytest.mark.asyncio(loop_scope="session")
USERS = "users:\n  - principal: alice\n    token: alice-token\n  - principal: bob\n    token: bob-token\n"
SEATS = [resources_pb2.Seat(id="main", role=resources_pb2.SEAT_ROLE_PLAYER),
         resources_pb2.Seat(id="second", role=resources_pb2.SEAT_ROLE_PLAYER)]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def together(tmp_path_factory):
    folder = tmp_path_factory.mktemp("together")
    (folder / "users.yaml").write_text(USERS)
    async with running_services(folder / "data", extra_env={"COVEL_API_USERS_FILE": str(folder / "users.yaml")}) as group, \
            running_web(group) as front:
        async with open_channel(group.addrs["scheduler"], bearer_token="alice-token") as channel:
            session = (await scheduler_pb2_grpc.SchedulerStub(channel).CreateSession(minimal_session(seats=SEATS), timeout=30)).session
        yield front, session


async def signed_in(browser, url: str, token: str, session_id: str = "", **viewport):
    context = await browser.new_context(viewport=viewport or {"width": 1100, "height": 900})
    await context.add_init_script(f"localStorage.setItem('covelToken', '{token}');"
                                  + (f"localStorage.setItem('covelSession', '{session_id}');" if session_id else ""))
    page = await context.new_page()
    await page.goto(url)
    return page


async def story_has(page, text: str) -> None:
    await page.wait_for_function(f"document.getElementById('story').textContent.includes({text!r})", timeout=60_000)


async def test_two_players_invite_join_and_see_each_others_turns(together, browser, tmp_path) -> None:
    front, session = together
    alice = await signed_in(browser, front.url, "alice-token", session.id)
    await alice.locator("#resume").click()
    await alice.locator("#seats [data-invite='second']").click()
    link = await alice.locator("#seats input[data-invite-link='second']").input_value()
    assert f"#join={session.id}." in link

    bob = await signed_in(browser, link, "bob-token", width=390, height=844)
    await bob.locator("#seats li[data-seat='second']").wait_for()
    assert "you" in (await bob.locator("#seats li[data-seat='second']").text_content() or "")
    assert await bob.locator("#seats [data-invite]").count() == 0, "a guest invites nobody"
    await alice.wait_for_function("document.querySelector(\"#seats li[data-seat='second']\").textContent.includes('bob')", timeout=30_000)

    await bob.locator("#text").fill("I knock twice on the door.")
    await bob.locator("#text").press("Enter")
    await story_has(alice, "I knock twice on the door.")
    await story_has(alice, "bob")
    await alice.locator("#text").fill("I open the door and let Bob in.")
    await alice.locator("#text").press("Enter")
    await story_has(bob, "I open the door and let Bob in.")
    # Each sees the other's story, not only the line: the narrator's answer to it streamed into both pages.
    for page in (alice, bob):
        paragraphs = await page.locator("#story p:not(.player)").count()
        assert paragraphs >= 2, await page.locator("#story").text_content()
    await alice.screenshot(path=shots(tmp_path) / "together-owner.png", full_page=True)
    await bob.screenshot(path=shots(tmp_path) / "together-guest.png", full_page=True)
    await alice.context.close()
    await bob.context.close()
