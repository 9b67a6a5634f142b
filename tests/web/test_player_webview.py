"""A community plugin on the player page, in headless Chromium against the web front and the five services: the page
asks the player to approve it and shows what its manifest lets it do; once approved, its webview panel runs in a
sandboxed frame that reaches neither the page, its storage nor the network, and talks to the page only through the
bridge (its own state, its plugin's declared action). The media route serves only that panel's folder."""

from __future__ import annotations

import shutil

import httpx
import pytest
import pytest_asyncio

from shared.settings import REPO_ROOT
from tests.e2e.conftest import TEST_PLUGIN_DIR, running_services
from tests.web.conftest import running_web, shots

pytestmark = pytest.mark.asyncio(loop_scope="session")
PACKAGE = REPO_ROOT / "tests" / "fixtures" / "web-plugins" / "web-map"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def community_web(tmp_path_factory):
    data = tmp_path_factory.mktemp("webview-web")
    community = data / "community"
    community.mkdir()
    shutil.copytree(PACKAGE, community / "web-map")
    async with running_services(data, plugin_dirs=(TEST_PLUGIN_DIR, community)) as group, running_web(group) as front:
        yield front


async def test_a_player_approves_a_community_plugin_and_uses_its_webview(community_web, browser, tmp_path) -> None:
    page = await browser.new_page(viewport={"width": 1100, "height": 800})
    await page.goto(community_web.url)
    await page.locator("#lang").wait_for()
    await page.evaluate("localStorage.setItem('covelToken', 'kept-out-of-frames')")
    await page.evaluate("api('POST', '/api/sessions', {requestedPlugins: ['web-map']}).then(({session}) => openSession(session))")

    card = page.locator("#approvals .approval[data-plugin='web-map']")
    await card.wait_for()
    shown = await card.inner_text()
    assert "GET https://maps.example.com" in shown and "actions: mark" in shown and "panels: right" in shown, shown
    assert await page.locator("iframe.webview").count() == 0, "nothing of it runs before the approval"
    await page.screenshot(path=shots(tmp_path) / "approval.png")
    await card.locator("button").focus()
    await page.keyboard.press("Enter")
    await page.locator("#notices .notice.success", has_text="Web map").wait_for()
    await card.wait_for(state="detached")

    await page.locator("#tab-world").click()
    frame_element = page.locator("iframe.webview[data-panel='map']")
    await frame_element.wait_for()
    assert await frame_element.get_attribute("sandbox") == "allow-scripts", "scripts, and no origin of its own"
    srcdoc = await frame_element.get_attribute("srcdoc") or ""
    assert (
        srcdoc.startswith('<meta http-equiv="Content-Security-Policy" content="default-src \'none\'')
        and "connect-src 'none'" in srcdoc
    )
    frame = page.frame_locator("iframe.webview[data-panel='map']")
    await frame.locator("body[data-state='ready']").wait_for()
    for probe in ("parent", "storage", "cookie", "fetch"):
        assert await frame.locator(f"#probe-{probe}").inner_text() == "blocked", f"the frame reaches no {probe}"

    # A message that is not from the frame (the page itself, or any other window) is not the bridge's.
    await page.evaluate(
        "window.postMessage({covel: 1, type: 'action', id: 'forged', action: 'mark', args: {place: 'forged'}}, '*')"
    )
    await frame.locator("#mark").click()
    await frame.locator("#result", has_text="marked lighthouse").wait_for()
    await frame.locator("#marks li", has_text="lighthouse").wait_for()
    # The panels are drawn again after every turn: the frame is kept (its page did not load again) and told the state.
    await page.evaluate("refresh()")
    assert await frame.locator("#result").inner_text() == "marked lighthouse", "the page in the frame was kept"
    assert await page.locator("iframe.webview").count() == 1
    session_id = await page.evaluate("state.session.id")
    async with httpx.AsyncClient(base_url=community_web.url, timeout=30) as client:
        panels = (await client.get(f"/api/sessions/{session_id}/panels")).json()["panels"]
    [panel] = [p for p in panels if p["pluginId"] == "web-map"]
    assert set(panel["state"]["data"]["marks"]) == {"lighthouse"}, "the forged message ran nothing"
    await page.screenshot(path=shots(tmp_path) / "webview.png")
    await page.close()


async def test_a_webview_asking_for_more_than_the_contract_gets_nothing(community_web, browser) -> None:
    page = await browser.new_page()
    await page.goto(community_web.url)
    await page.locator("#lang").wait_for()
    await page.evaluate(
        "api('POST', '/api/sessions', {requestedPlugins: ['web-map'], approvedPlugins: ['web-map']})"
        ".then(({session}) => openSession(session))"
    )
    await page.locator("#tab-world").click()
    frame = page.frame_locator("iframe.webview[data-panel='map']")
    await frame.locator("body[data-state='ready']").wait_for()
    frames = [f for f in page.frames if f != page.main_frame]
    assert len(frames) == 1
    # Another plugin's action, a path for an action name, an extra field: no answer, nothing run.
    await frames[0].evaluate("""() => {
        window.answers = [];
        window.addEventListener('message', (event) => { if (event.data.type === 'result') window.answers.push(event.data); });
        parent.postMessage({covel: 1, type: 'action', id: 'a', action: '../approvals', args: {}}, '*');
        parent.postMessage({covel: 1, type: 'action', id: 'b', action: 'mark', args: {place: 'x'}, pluginId: 'inventory'}, '*');
        parent.postMessage({covel: 2, type: 'action', id: 'c', action: 'mark', args: {place: 'y'}}, '*');
        parent.postMessage({covel: 1, type: 'action', id: 'd', action: 'nudge', args: {}}, '*');
    }""")
    answered = await frames[0].wait_for_function("() => window.answers.length >= 1 && window.answers")
    answers = await answered.json_value()
    assert [a["id"] for a in answers] == ["d"] and answers[0]["ok"] is False and answers[0]["error"]["code"] == "NOT_FOUND", (
        answers
    )
    await page.close()


async def test_the_media_route_serves_a_webview_folder_only(community_web) -> None:
    async with httpx.AsyncClient(base_url=community_web.url, timeout=30) as client:
        session = (await client.post("/api/sessions", json={"requestedPlugins": ["web-map"]})).json()["session"]
        media = f"/api/sessions/{session['id']}/media"
        waiting = await client.get(media, params={"pluginId": "web-map", "path": "ui/map.html"})
        assert (
            waiting.status_code == 404
            and waiting.json()["reason"] == "PLUGIN_NOT_ACTIVE"
            and "approv" in waiting.json()["message"]
        )
        await client.post(f"/api/sessions/{session['id']}/approvals", json={"approve": ["web-map"]})
        page = await client.get(media, params={"pluginId": "web-map", "path": "ui/map.html"})
        assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8", page.text
        policy = page.headers["content-security-policy"]
        assert "sandbox allow-scripts" in policy and "connect-src 'none'" in policy and "default-src 'none'" in policy
        code = await client.get(media, params={"pluginId": "web-map", "path": "server/index.py"})
        assert code.status_code == 404 and code.json()["reason"] == "MEDIA_NOT_DECLARED", "its code is no file to show"
        climbing = await client.get(media, params={"pluginId": "web-map", "path": "ui/../server/index.py"})
        assert climbing.status_code == 400
        manifest = await client.get(media, params={"pluginId": "web-map", "path": "PLUGIN.md"})
        assert manifest.status_code == 404


async def test_on_a_phone_the_approval_and_the_webview_fit_the_screen(community_web, browser, tmp_path) -> None:
    page = await browser.new_page(viewport={"width": 375, "height": 740})
    await page.goto(community_web.url)
    await page.locator("#lang").wait_for()
    await page.evaluate("api('POST', '/api/sessions', {requestedPlugins: ['web-map']}).then(({session}) => openSession(session))")
    card = page.locator("#approvals .approval[data-plugin='web-map']")
    await card.wait_for()
    left, width = await card.evaluate("(node) => { const box = node.getBoundingClientRect(); return [box.x, box.width]; }")
    assert left >= 0 and left + width <= 375, (left, width)
    await card.locator("button").click()
    await card.wait_for(state="detached")
    await page.locator("#panels-open").click()
    await page.locator("#tab-world").click()
    frame = page.frame_locator("iframe.webview[data-panel='map']")
    await frame.locator("body[data-state='ready']").wait_for()
    left, width = await page.locator("iframe.webview").evaluate(
        "(node) => { const box = node.getBoundingClientRect(); return [box.x, box.width]; }"
    )
    assert left >= 0 and left + width <= 375, (left, width)
    await frame.locator("#mark").click()
    await frame.locator("#result", has_text="marked lighthouse").wait_for()
    await page.screenshot(path=shots(tmp_path) / "webview-phone.png")
    await page.close()
