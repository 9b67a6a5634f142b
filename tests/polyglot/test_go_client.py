"""The Go module (covel.dev/api, `make clients`): clients/build.py writes it as a Go module proxy; a program of the
test's own (tests/polyglot/go/client.go) and the module's one-page example are built in module mode, resolving
covel.dev/api through that proxy (GOPROXY=file://...), then play against the five real services: two turns, the
turns paged, an error's details decoded. Go and the generators are Debian's (`make test` installs them:
golang-go, protobuf-compiler, protoc-gen-go, protoc-gen-go-grpc and the Go libraries). Offline, the module's own
requirements (gRPC, protobuf, genproto, x/net, x/sys, x/text) come from Debian's sources through `replace`
lines (tests/polyglot/go_mirror.py); a user's `go get` takes them from proxy.golang.org."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shared.settings import REPO_ROOT
from tests.e2e.conftest import running_services
from tests.polyglot.go_mirror import consumer_module
from tests.support.builtin_plugins import non_story_core_plugin_ids

sys.path.insert(0, str(REPO_ROOT / "clients"))
from build import build_go_proxy, client_version  # noqa: E402  (clients/build.py is no package: it runs as `make clients`)

GO_DIR = REPO_ROOT / "tests" / "polyglot" / "go"
ACTIONS = ["I light the lantern and step into the cellar.", "I open the old chest."]


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not on PATH: `make test` installs it (apt-get install golang-go protobuf-compiler protoc-gen-go "
                    "protoc-gen-go-grpc golang-google-grpc-dev golang-google-protobuf-dev golang-google-genproto-dev "
                    "golang-github-golang-protobuf-1-5-dev)")
    return found


@pytest.fixture(scope="module")
def go_programs(tmp_path_factory) -> dict[str, str]:
    for name in ("protoc", "protoc-gen-go", "protoc-gen-go-grpc"):
        tool(name)
    work = tmp_path_factory.mktemp("go")
    proxy = build_go_proxy(work / "dist")
    app = consumer_module(work / "app", {"covel.dev/api": f"v{client_version()}"})
    shutil.copy(GO_DIR / "client.go", app / "client.go")
    # Go's own build cache (content-addressed, as `go build` keeps it by default): the gRPC and protobuf libraries
    # compile once per machine (about a minute of CPU), not on every run. The module cache is the test's own.
    cache = os.environ.get("GOCACHE") or str(Path.home() / ".cache" / "go-build")
    env = {**os.environ, "GOPATH": str(work / "gopath"), "GO111MODULE": "on", "GOFLAGS": "-mod=mod", "GOCACHE": cache,
           "GOPROXY": proxy.as_uri(), "GOSUMDB": "off", "GOTOOLCHAIN": "local"}
    built = {}
    for name, target in (("client", "."), ("example", "covel.dev/api/examples/play")):
        done = subprocess.run([tool("go"), "build", "-o", str(work / name), target], cwd=app, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        built[name] = str(work / name)
    assert "covel.dev/api v" in (app / "go.sum").read_text(), "covel.dev/api was resolved through the proxy"
    return built


async def test_go_client_plays_two_turns_pages_and_reads_error_details(go_programs, tmp_path):
    async with running_services(tmp_path) as group:
        env = {**os.environ, "EXCLUDED_PLUGINS": ",".join(non_story_core_plugin_ids())}
        result = await asyncio.to_thread(subprocess.run, [go_programs["client"], "--addr", group.addrs["scheduler"], *ACTIONS],
                                         capture_output=True, text=True, timeout=120, env=env)
        # Without EXCLUDED_PLUGINS (unset, as a first run has it) the session keeps every core plugin.
        bare = await asyncio.to_thread(subprocess.run, [go_programs["client"], "--addr", group.addrs["scheduler"], ACTIONS[0]],
                                       capture_output=True, text=True, timeout=120,
                                       env={k: v for k, v in os.environ.items() if k != "EXCLUDED_PLUGINS"})
    assert bare.returncode == 0, bare.stderr
    assert [turn["status"] for turn in json.loads(bare.stdout)["turns"]] == ["TURN_STATUS_COMMITTED"]
    assert result.returncode == 0, result.stderr
    played = json.loads(result.stdout)
    assert [turn["status"] for turn in played["turns"]] == ["TURN_STATUS_COMMITTED"] * 2
    assert all(turn["story"] and turn["events"] > 2 and turn["batches"] == 0 for turn in played["turns"]), played["turns"]
    # Asked for batches, the stream sent some; EventsOf opens them (fewer messages than events).
    assert played["raw_batches"] > 0 and played["raw_events"] > played["raw_messages"], played
    assert "light the lantern" in played["turns"][0]["story"]
    assert (played["listed"], played["pages"]) == (2, 2), "ListTurns a page of one at a time"
    assert played["error"] == "InvalidArgument" and played["field_violations"] == ["actions"]
    assert played["error_reason"] and played["missing"] == "SESSION_NOT_FOUND covel.scheduler.v1.Session/no-such-session"


async def test_the_go_modules_example_plays_a_session(go_programs, tmp_path) -> None:
    async with running_services(tmp_path) as group:
        env = {**os.environ, "EXCLUDED_PLUGINS": ",".join(non_story_core_plugin_ids())}
        done = await asyncio.to_thread(subprocess.run, [go_programs["example"], group.addrs["scheduler"], *ACTIONS],
                                       capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("session ") and f"> {ACTIONS[0]}" in lines and f"> {ACTIONS[1]}" in lines, done.stdout
    assert "light the lantern" in done.stdout.split(f"> {ACTIONS[0]}")[1], done.stdout
    assert "2 turns recorded" in lines, done.stdout
    assert lines[-1] == "asked for a missing session: NotFound SESSION_NOT_FOUND covel.scheduler.v1.Session/no-such-session", lines[-1]
