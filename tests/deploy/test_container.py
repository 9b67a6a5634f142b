"""The container image (deploy/Dockerfile) without a container engine: hadolint on the
Dockerfile, its essentials, and the image's /app tree assembled from its COPY lines running a
real service through the entry point (`covel-service <name>`, `covel-service probe`)."""

from __future__ import annotations

import fnmatch
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from covel_cli.launcher import SERVICES
from shared.settings import REPO_ROOT
from tests.conftest import free_addr
from tests.support.identities import issued

DOCKERFILE = REPO_ROOT / "deploy" / "Dockerfile"
HADOLINT = Path(sys.executable).parent / "hadolint"


def final_stage() -> list[dict]:
    """Instructions after the last FROM."""
    structure = DockerfileParser(str(DOCKERFILE)).structure
    last_from = max(index for index, item in enumerate(structure) if item["instruction"] == "FROM")
    return [item for item in structure[last_from + 1:] if item["instruction"] != "COMMENT"]


def instruction(name: str) -> dict:
    found = [item for item in final_stage() if item["instruction"] == name]
    assert found, f"the image has no {name}"
    return found[-1]


def test_hadolint_passes():
    result = subprocess.run([str(HADOLINT), str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_runs_as_a_non_root_user():
    user = instruction("USER")["value"].split(":")[0]
    assert user not in ("root", "0"), user
    assert user.isdigit(), "a numeric uid lets Kubernetes check runAsNonRoot"


def test_entrypoint_picks_the_service_and_healthcheck_uses_grpc_health():
    assert instruction("ENTRYPOINT")["value"] == '["covel-service"]'
    assert instruction("CMD")["value"].strip('[]"') in SERVICES
    assert instruction("HEALTHCHECK")["value"].endswith('CMD ["covel-service", "probe"]')


def build_context_ignored() -> list[str]:
    """Patterns of deploy/Dockerfile.dockerignore (paths relative to the repository root)."""
    lines = (REPO_ROOT / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ignore_as_docker_does(directory: str, names: list[str]) -> set[str]:
    patterns = build_context_ignored()
    relative = Path(directory).resolve().relative_to(REPO_ROOT)
    return {
        name for name in names
        for pattern in patterns
        if fnmatch.fnmatch((relative / name).as_posix(), pattern)
        or (pattern.startswith("**/") and fnmatch.fnmatch(name, pattern[3:]))
    }


def assemble_app(root: Path) -> Path:
    """The final stage's /app from its `COPY <repo path> ./<dest>` lines; the stubs stage's output
    is the repository's shared/gen, made by the same `make proto`."""
    app = root / "app"
    app.mkdir()
    for item in final_stage():
        if item["instruction"] != "COPY":
            continue
        parts = item["value"].split()
        if parts[0] == "--from=stubs":
            source, destination = REPO_ROOT / "shared" / "gen", parts[2]
        elif parts[0].startswith("--from="):
            continue  # the dependency venv: this test runs with the dev venv instead
        else:
            source, destination = REPO_ROOT / parts[0], parts[1]
        target = app / destination if destination.startswith("./") else root / destination.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore_as_docker_does, dirs_exist_ok=False)
        else:
            shutil.copy2(source, target)
    return app


@pytest.fixture(scope="module")
def image_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("image")
    assemble_app(root)
    return root


def image_env(root: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("COVEL_")}
    # As the image's ENV says, with /app where the test assembled it.
    env["PYTHONPATH"] = f"{root / 'app'}{os.pathsep}{root / 'app' / 'shared' / 'gen'}"
    env["COVEL_DATA_DIR"] = str(root / "var-lib-covel")
    env.update(extra)
    return env


def covel_service(root: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(root / "usr/local/bin/covel-service"), *args],
        cwd=root / "app", env=env, capture_output=True, text=True, timeout=30,
    )


def test_unknown_service_is_refused_with_the_names(image_root):
    result = covel_service(image_root, "schedular", env=image_env(image_root))
    assert result.returncode != 0
    assert "unknown service 'schedular'" in result.stderr and "scheduler" in result.stderr


def test_image_tree_serves_a_service_that_probes_serving_and_stops_on_sigterm(image_root):
    # The cluster-style address of the service; the entry point listens on COVEL_LISTEN_HOST at its port.
    port = free_addr().rpartition(":")[2]
    # Its own certificate, as the cluster mounts it: the probe (health, open to any certificate of the CA) presents it too.
    env = image_env(image_root, COVEL_REGISTRY_ADDR=f"covel-registry.invalid:{port}", COVEL_LISTEN_HOST="127.0.0.1",
                    **issued("registry").env())
    assert covel_service(image_root, "probe", "registry", env=env).returncode == 1  # nothing there yet
    process = subprocess.Popen(
        [sys.executable, str(image_root / "usr/local/bin/covel-service"), "registry"],
        cwd=image_root / "app", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            probe = covel_service(image_root, "probe", "registry", env=env)
            if probe.returncode == 0 or process.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert probe.returncode == 0, (probe.stdout, probe.stderr, process.poll())
        assert probe.stdout.strip() == f"registry 127.0.0.1:{port} SERVING"
        # The builtin plugins are found next to shared/ in the image tree (not in the repository).
        assert str(image_root / "app" / "plugins") in _registry_plugin_dirs(port)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
        output = process.communicate()[0]
    assert '"event": "service.stopped"' in output or "service.stopped" in output


def _registry_plugin_dirs(port: str) -> str:
    import grpc

    from covel.registry.v1 import registry_pb2, registry_pb2_grpc

    operator = issued("operator")  # ListPlugins: the hooks service's call, and the operator's
    credentials = grpc.ssl_channel_credentials(operator.ca.read_bytes(), operator.key.read_bytes(), operator.cert.read_bytes())
    with grpc.secure_channel(f"127.0.0.1:{port}", credentials) as channel:
        reply = registry_pb2_grpc.PluginRegistryStub(channel).ListPlugins(registry_pb2.ListPluginsRequest(), timeout=10)
    return " ".join(plugin.root_dir for plugin in reply.plugins)


def test_probe_without_a_name_finds_the_service_pid_1_runs(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("covel_service", REPO_ROOT / "deploy" / "covel_service.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cmdline = tmp_path / "cmdline"
    cmdline.write_bytes(b"/opt/venv/bin/python\0-m\0services.store\0")
    assert module.service_of_pid1(cmdline) == "store"
    cmdline.write_bytes(b"/bin/sh\0-c\0sleep 1\0")
    assert module.service_of_pid1(cmdline) is None
    assert module.listen_addr("covel-store:50154", "0.0.0.0") == "0.0.0.0:50154"
    with pytest.raises(ValueError, match="no port"):
        module.listen_addr("covel-store", "0.0.0.0")
