"""docs/operations.md "Scale" shows bench.scale's tables as `python -m bench.scale --operations-tables` prints them.

The model is deterministic, so the page's tables are the code's output: the model against the quiet figures, what
one replica carries, and the predictions. The 10,000-player rows take minutes to simulate; this test simulates the
1,000-player ones and checks every other row, and that the page's 10,000-player rows are the same deployments'.
"""

from __future__ import annotations

from pathlib import Path

from bench.scale import DOCUMENTED, MEASURED_SECONDS, compare, forecast, parse
from bench.scale_render import carried, checks, predictions

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
BEGIN, END = "<!-- bench.scale --operations-tables: begin -->", "<!-- bench.scale --operations-tables: end -->"


def rows(markdown: str) -> list[list[str]]:
    """A markdown table's rows as stripped cells, the header and the rule left out."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def page_tables() -> list[list[list[str]]]:
    text = PAGE.read_text()
    assert BEGIN in text and END in text, f"docs/operations.md lost its markers {BEGIN!r} and {END!r}"
    block = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    return [rows(part) for part in block.split("\n\n") if part.strip().startswith("|")]


def test_the_page_shows_the_models_tables() -> None:
    args = parse(["--players", "1000"])
    documented = [compare(profile, sessions, tps, p50, MEASURED_SECONDS) for profile, sessions, tps, p50 in DOCUMENTED]
    result = forecast(args)
    on_page = page_tables()
    assert len(on_page) == 3
    assert on_page[0] == rows(checks(documented)), "run `python -m bench.scale --operations-tables` and update the page"
    assert on_page[1] == rows(carried(result))
    simulated = rows(predictions(result))
    assert [row for row in on_page[2] if row[1] == "1,000"] == simulated
    assert [row[0] for row in on_page[2] if row[1] == "10,000"] == [row[0] for row in simulated]
