"""The page's bundled CJK font (services/web/cjk_font.py, installed by make): the web front serves its @font-face
rules and slices, the page's font stacks name it last, and Chromium loads the slice a Chinese text needs from the
web front (so a machine without a CJK font shows glyphs, not boxes)."""

from __future__ import annotations

import re

import httpx
import pytest

from services.web import cjk_font

pytestmark = pytest.mark.asyncio(loop_scope="session")


def test_without_the_install_the_stylesheet_is_empty(tmp_path) -> None:
    assert "@font-face" not in cjk_font.stylesheet(tmp_path / "missing")


async def test_the_page_loads_the_bundled_cjk_font_for_chinese_text(web, browser) -> None:
    assert (cjk_font.FONT_DIR / "400.css").exists(), "make installs the font: python -m services.web.cjk_font"
    async with httpx.AsyncClient() as client:
        css = await client.get(f"{web.url}/fonts/cjk.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert css.text.count("@font-face") > 80 and f"font-family: '{cjk_font.FAMILY}'" in css.text
        starts = [int(part.strip().removeprefix("U+").split("-")[0], 16) for ranges in re.findall(r"unicode-range: ([^;]*);", css.text)
                  for part in ranges.split(",")]
        assert min(starts) >= 0x2E80, "CJK text only: Latin stays in the page's own serif"
        assert "./files/" not in css.text and ".woff)" not in css.text
        escaped = await client.get(f"{web.url}/fonts/noto-sans-sc/..%2f..%2fapp.py")
        assert escaped.status_code == 404
    page = await browser.new_page()
    fetched: list[tuple[str, int]] = []
    page.on("response", lambda response: fetched.append((response.url, response.status)) if "/fonts/noto-sans-sc/" in response.url else None)
    await page.goto(web.url)
    stack = await page.evaluate("getComputedStyle(document.body).fontFamily")
    assert cjk_font.FAMILY in stack, stack
    faces = await page.evaluate(f"document.fonts.load('16px \"{cjk_font.FAMILY}\"', '世界的故事').then((found) => found.map((f) => f.status))")
    assert faces and set(faces) == {"loaded"}, faces
    assert fetched and all(status == 200 for _, status in fetched), fetched
    assert all(url.endswith(".woff2") for url, _ in fetched), fetched
    await page.close()
