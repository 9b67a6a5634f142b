"""The player page against the gRPC client: time to the first story text of a turn, and the page's weight.

`python -m bench.web_player`: the five services and the web front as processes; one narrator session, whose
turns alternate between the gRPC client (SubmitActions, the first narrative_delta) and the page in headless
Chromium (the page's own `stream()` over the HTTP/JSON API, the first narrativeDelta event), so both read the
same kind of turn under the same load. Reports p50 / p95 of each and their ratio; the page's weight is its
files (HTML, CSS, JavaScript, the favicon), raw and gzipped, and the requests it makes before it can play.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import shutil
import time

from bench.common import PROCESSES, TCP, create_session, play_counted_turn, running_services, summarize, table, write_result
from covel.scheduler.v1 import scheduler_pb2_grpc
from services.web.app import STATIC
from shared.grpc_client import open_channel
from tests.web.conftest import running_web

# Every file of the page: the HTML, the stylesheets, app.js and its ES modules, the favicon.
PAGE_FILES = tuple(sorted(path.name for path in STATIC.iterdir() if path.is_file()))
# The page's own streaming reader (app.js `stream`), timed from the POST to the first story text.
FIRST_TEXT_IN_PAGE = """async ([sessionId, text]) => {
  const started = performance.now();
  let first = null;
  await stream(`/api/sessions/${sessionId}/actions`, {actions: [{kind: "do", text}]}, (name) => {
    if (name === "narrativeDelta" && first === null) first = performance.now() - started;
  });
  return first;
}"""


def page_weight() -> dict:
    raw = {name: (STATIC / name).read_bytes() for name in PAGE_FILES}
    return {"files": {name: len(data) for name, data in raw.items()}, "bytes": sum(map(len, raw.values())),
            "gzip_bytes": sum(len(gzip.compress(data)) for data in raw.values()),
            # The page, its other files, then GET /api/worlds before a world can be picked.
            "requests_to_start": len(PAGE_FILES) + 1}


async def measure(turns: int, warmup: int) -> dict:
    from playwright.async_api import async_playwright

    grpc_ms, page_ms = [], []
    async with running_services(PROCESSES, TCP) as group, running_web(group) as web, async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                                   headless=True, args=["--no-sandbox"])
        page = await browser.new_page()
        await page.goto(web.url)
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            session = await create_session(stub)
            for index in range(warmup + turns):
                _, grpc_first, _, _ = await play_counted_turn(stub, session.id, f"I walk on, step {index}.")
                started = time.perf_counter()
                in_page = await page.evaluate(FIRST_TEXT_IN_PAGE, [session.id, f"I look on, step {index}."])
                assert in_page is not None, f"no story text reached the page ({(time.perf_counter() - started) * 1000:.0f} ms)"
                if index >= warmup:
                    grpc_ms.append(grpc_first)
                    page_ms.append(in_page)
        await browser.close()
    grpc_summary, page_summary = summarize(grpc_ms), summarize(page_ms)
    return {"turns": turns, "grpc_first_text_ms": grpc_summary, "page_first_text_ms": page_summary,
            "page_over_grpc": page_summary["p50"] / grpc_summary["p50"], "page_weight": page_weight()}


def render(result: dict) -> str:
    grpc_ms, page_ms, weight = result["grpc_first_text_ms"], result["page_first_text_ms"], result["page_weight"]
    timing = table([f"first story text, {result['turns']} turns each, narrator", "p50 ms", "p95 ms"],
                   [["gRPC client (SubmitActions)", grpc_ms["p50"], grpc_ms["p95"]],
                    ["player page (HTTP/JSON, Server-Sent Events, Chromium)", page_ms["p50"], page_ms["p95"]],
                    ["ratio page / gRPC (p50)", round(result["page_over_grpc"], 2), ""]])
    files = table(["page weight", "bytes"], [*([name, size] for name, size in weight["files"].items()),
                                             ["all, raw", weight["bytes"]], ["all, gzipped", weight["gzip_bytes"]],
                                             ["requests before a world can be picked", weight["requests_to_start"]]])
    return f"{timing}\n\n{files}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    result = asyncio.run(measure(args.turns, args.warmup))
    write_result("web_player", result)
    print(render(result))


if __name__ == "__main__":
    main()
