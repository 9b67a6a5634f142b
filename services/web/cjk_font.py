"""The page's bundled CJK font: Noto Sans SC (SIL Open Font License), from the npm package @fontsource/noto-sans-sc.

`make` installs it (`python -m services.web.cjk_font`): the package's regular weight as 101 WOFF2 slices, each with
the unicode-range it covers, into services/web/fonts/noto-sans-sc/ (not in the repository: 3.4 MB). The web front
serves the slices under /fonts/noto-sans-sc/ and `/fonts/cjk.css`, their @font-face rules as the family
"Covel Noto Sans SC" narrowed to CJK characters, which the page's font stacks name last: a machine with a CJK font of its own uses it, one
without downloads only the slices of the characters a page shows. Without the install, /fonts/cjk.css is empty and
the page falls back to the machine's fonts.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "@fontsource/noto-sans-sc@5.3.1"
FAMILY = "Covel Noto Sans SC"
FONT_DIR = Path(__file__).parent / "fonts" / "noto-sans-sc"
URL_PREFIX = "/fonts/noto-sans-sc/"
CJK_FROM = 0x2E80
WANTED = re.compile(r"^package/(files/[a-z0-9-]+-400-normal\.woff2|400\.css|LICENSE)$")


def install(target: Path = FONT_DIR) -> Path:
    """The package fetched with npm (which checks its integrity) and its regular weight's slices put in `target`."""
    with tempfile.TemporaryDirectory() as scratch:
        packed = subprocess.run(["npm", "pack", PACKAGE, "--silent", "--pack-destination", scratch], check=True,
                                capture_output=True, text=True, timeout=600).stdout.strip().splitlines()[-1]
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(Path(scratch) / packed) as archive:
            for member in archive.getmembers():
                found = WANTED.match(member.name)
                if found and member.isfile():
                    data = archive.extractfile(member)
                    assert data is not None
                    (target / Path(found.group(1)).name).write_bytes(data.read())
    return target


def stylesheet(folder: Path = FONT_DIR) -> str:
    """The @font-face rules of the installed slices, pointing at the web front's /fonts/ route ("" when not installed)."""
    source = folder / "400.css"
    if not source.exists():
        return "/* no bundled CJK font: `make` installs it (services/web/cjk_font.py) */\n"
    css = source.read_text(encoding="utf-8").replace("font-family: 'Noto Sans SC';", f"font-family: '{FAMILY}';")
    # Only the WOFF2 slices are installed: the WOFF fallback goes (every browser the page supports reads WOFF2).
    css = re.sub(r"url\(\./files/([a-z0-9-]+\.woff2)\) format\('woff2'\), url\(\./files/[a-z0-9-]+\.woff\) format\('woff'\)",
                 lambda m: f"url({URL_PREFIX}{m.group(1)}) format('woff2')", css)
    # For CJK text only: Latin, Cyrillic and the rest stay in the page's own stacks (its serif), so each rule keeps the
    # ranges from CJK radicals (U+2E80) on, and a rule left with none goes.
    rules = [_cjk_only(rule) for rule in re.findall(r"@font-face \{.*?\}", css, flags=re.S)]
    return "\n".join(rule for rule in rules if rule is not None) + "\n"


def _cjk_only(rule: str) -> str | None:
    found = re.search(r"unicode-range: ([^;]*);", rule)
    if found is None:
        return None
    kept = [part for part in found.group(1).split(",") if int(part.strip().removeprefix("U+").split("-")[0], 16) >= CJK_FROM]
    return rule.replace(found.group(0), f"unicode-range: {','.join(kept)};") if kept else None


if __name__ == "__main__":
    print(install())
    sys.exit(0)
