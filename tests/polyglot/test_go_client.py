"""The gRPC API from Go: tests/polyglot/go/client.go, compiled against stubs protoc-gen-go and
protoc-gen-go-grpc generate from protos/ (their go_package options, and protos/google/rpc for the error
details), plays two turns against the five real services, pages ListTurns and decodes an error's
details. Go and the generators are Debian's (`make test` installs them: golang-go, protobuf-compiler,
protoc-gen-go, protoc-gen-go-grpc and the Go libraries), built in GOPATH mode, offline."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from shared.settings import REPO_ROOT
from tests.e2e.conftest import running_services
from tests.support.builtin_plugins import non_story_core_plugin_ids

GO_DIR = REPO_ROOT / "tests" / "polyglot" / "go"
PROTOS = REPO_ROOT / "protos"
GO_LIBRARIES = Path("/usr/share/gocode")
ACTIONS = ["I light the lantern and step into the cellar.", "I open the old chest."]


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not on PATH: `make test` installs it (apt-get install golang-go protobuf-compiler protoc-gen-go "
                    "protoc-gen-go-grpc golang-google-grpc-dev golang-google-protobuf-dev golang-google-genproto-dev "
                    "golang-github-golang-protobuf-1-5-dev)")
    return found


@pytest.fixture(scope="module")
def go_client(tmp_path_factory) -> str:
    gopath = tmp_path_factory.mktemp("gopath")
    (gopath / "src").mkdir()
    # The public package alone: it imports nothing else of the kernel's.
    protos = sorted(str(path.relative_to(PROTOS)) for path in (PROTOS / "covel" / "scheduler" / "v1").glob("*.proto"))
    generated = subprocess.run(
        [tool("protoc"), f"-I{PROTOS}", f"--plugin=protoc-gen-go={tool('protoc-gen-go')}", f"--plugin=protoc-gen-go-grpc={tool('protoc-gen-go-grpc')}",
         f"--go_out={gopath / 'src'}", f"--go-grpc_out={gopath / 'src'}", *protos],
        capture_output=True, text=True, timeout=120)
    assert generated.returncode == 0, generated.stderr
    source = gopath / "src" / "covelclient"
    source.mkdir()
    shutil.copy(GO_DIR / "client.go", source / "client.go")
    # Go's own build cache (content-addressed, as `go build` keeps it by default): the gRPC and protobuf libraries
    # compile once per machine (about a minute of CPU), not on every run.
    cache = os.environ.get("GOCACHE") or str(Path.home() / ".cache" / "go-build")
    env = {**os.environ, "GOPATH": f"{gopath}:{GO_LIBRARIES}", "GO111MODULE": "off", "GOFLAGS": "", "GOCACHE": cache,
           "GOPROXY": "off"}
    built = subprocess.run([tool("go"), "build", "-o", str(gopath / "client"), "."], cwd=source, env=env,
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    return str(gopath / "client")


async def test_go_client_plays_two_turns_pages_and_reads_error_details(go_client, tmp_path):
    async with running_services(tmp_path) as group:
        env = {**os.environ, "EXCLUDED_PLUGINS": ",".join(non_story_core_plugin_ids())}
        result = await asyncio.to_thread(subprocess.run, [go_client, "--addr", group.addrs["scheduler"], *ACTIONS],
                                         capture_output=True, text=True, timeout=120, env=env)
        # Without EXCLUDED_PLUGINS (unset, as a first run has it) the session keeps every core plugin.
        bare = await asyncio.to_thread(subprocess.run, [go_client, "--addr", group.addrs["scheduler"], ACTIONS[0]],
                                       capture_output=True, text=True, timeout=120,
                                       env={k: v for k, v in os.environ.items() if k != "EXCLUDED_PLUGINS"})
    assert bare.returncode == 0, bare.stderr
    assert [turn["status"] for turn in json.loads(bare.stdout)["turns"]] == ["TURN_STATUS_COMMITTED"]
    assert result.returncode == 0, result.stderr
    played = json.loads(result.stdout)
    assert [turn["status"] for turn in played["turns"]] == ["TURN_STATUS_COMMITTED"] * 2
    assert all(turn["story"] and turn["events"] > 2 for turn in played["turns"]), played["turns"]
    assert "light the lantern" in played["turns"][0]["story"]
    assert (played["listed"], played["pages"]) == (2, 2), "ListTurns a page of one at a time"
    assert played["error"] == "InvalidArgument" and played["field_violations"] == ["actions"]
