"""Three screens of the player page compared with the stored ones the README shows (docs/images/): the demo world's
story with its panels on a desktop, the panel drawer on a phone, and the setup form in the dark theme. Compared at
low resolution (a 64-pixel-wide grey grid, drawn by the browser's own scaler), so that another machine's fonts and
anti-aliasing pass while a moved, missing or recoloured part of the page does not. COVEL_UPDATE_SCREENS=1 writes
the screens as the new stored ones (then look at them before committing)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from shared.settings import REPO_ROOT
from tests.web.conftest import shots
from tests.web.test_player_layout import DESKTOP, PHONE, play, start_demo

pytestmark = pytest.mark.asyncio(loop_scope="session")
STORED = REPO_ROOT / "docs" / "images"
# Mean difference of the grey grid (0-255), and the share of its cells that differ by more than CELL.
MEAN_LIMIT = 10.0
CELL = 64
CELLS_LIMIT = 0.06

# Both pictures scaled to a 64-pixel-wide grid of grey levels, in the page (no imaging library needed).
COMPARE = (
    """async ([a, b]) => {
  const grid = async (data) => {
    const bitmap = await createImageBitmap(await (await fetch('data:image/png;base64,' + data)).blob());
    const width = 64, height = Math.max(1, Math.round(64 * bitmap.height / bitmap.width));
    const canvas = new OffscreenCanvas(width, height);
    const context = canvas.getContext('2d');
    context.imageSmoothingQuality = 'high';
    context.drawImage(bitmap, 0, 0, width, height);
    const pixels = context.getImageData(0, 0, width, height).data;
    const grey = [];
    for (let i = 0; i < pixels.length; i += 4) grey.push(0.299 * pixels[i] + 0.587 * pixels[i + 1] + 0.114 * pixels[i + 2]);
    return { grey, size: [bitmap.width, bitmap.height] };
  };
  const [x, y] = [await grid(a), await grid(b)];
  if (x.grey.length !== y.grey.length) return { sameShape: false, sizes: [x.size, y.size] };
  const diffs = x.grey.map((value, i) => Math.abs(value - y.grey[i]));
  return { sameShape: true, sizes: [x.size, y.size], mean: diffs.reduce((s, d) => s + d, 0) / diffs.length,
           cells: diffs.filter((d) => d > %d).length / diffs.length };
}"""
    % CELL
)


async def compare(page, shot: bytes, stored: bytes) -> dict:
    return await page.evaluate(COMPARE, [base64.b64encode(shot).decode(), base64.b64encode(stored).decode()])


async def check(page, shot: bytes, name: str, tmp_path: Path) -> None:
    (shots(tmp_path) / name).write_bytes(shot)
    stored = STORED / name
    if os.environ.get("COVEL_UPDATE_SCREENS") == "1":
        stored.write_bytes(shot)
    assert stored.is_file(), f"no stored screen {stored}; run with COVEL_UPDATE_SCREENS=1 to write it"
    found = await compare(page, shot, stored.read_bytes())
    assert found["sameShape"] and found["mean"] < MEAN_LIMIT and found["cells"] < CELLS_LIMIT, (
        f"{name} differs from the stored screen (this test's output has the new one): {found}"
    )


async def quiet(page) -> None:
    """What changes from run to run out of the picture: notices (they expire), the caret, a moving dot."""
    await page.evaluate(
        "document.getElementById('notices').replaceChildren(); document.activeElement && document.activeElement.blur()"
    )


async def test_the_story_the_drawer_and_the_dark_setup_look_as_stored(web, browser, tmp_path) -> None:
    page = await browser.new_page(viewport=DESKTOP)
    await start_demo(page, web.url)
    await play(page, "I push open the door of the inn.")
    await page.wait_for_function(
        "document.querySelector('#backdrop img') && document.querySelector('#backdrop img').naturalWidth > 0"
    )
    await page.evaluate("window.scrollTo(0, 0)")
    await quiet(page)
    story = await page.screenshot(animations="disabled")
    await check(page, story, "player-story.png", tmp_path)

    phone = await browser.new_page(viewport=PHONE)
    await start_demo(phone, web.url, "Ash")
    await phone.locator("#panels-open").click()
    await phone.locator("#tab-you").click()
    await phone.locator(".panel[data-plugin='char-creator']", has_text="Ash").wait_for()
    await phone.wait_for_function("getComputedStyle(document.getElementById('panels')).transform === 'none'")
    await quiet(phone)
    await check(page, await phone.screenshot(animations="disabled"), "player-phone-drawer.png", tmp_path)
    await phone.close()

    dark = await browser.new_page(viewport=DESKTOP, color_scheme="dark")
    await dark.goto(web.url)
    await dark.locator("button[data-world='demo-world']").click()
    await dark.locator("#q-protagonist-name").wait_for()
    await quiet(dark)
    dark_shot = await dark.screenshot(animations="disabled")
    await check(page, dark_shot, "player-setup-dark.png", tmp_path)
    await dark.close()

    # The comparison can fail: the dark setup is not the story, by far.
    unlike = await compare(page, story, dark_shot)
    assert unlike["mean"] > 2 * MEAN_LIMIT and unlike["cells"] > 2 * CELLS_LIMIT, unlike
    await page.close()
