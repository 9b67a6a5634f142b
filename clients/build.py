"""`make clients`: the client packages of the public API (covel.scheduler.v1), built from protos/.

- Python: the messages and stubs generated (grpcio-tools, typed with mypy-protobuf) into
  clients/python/src/covel_client/v1/ with package-relative imports, then a wheel in clients/dist/.
- Node.js: the public package's .proto files and google/rpc's copied into clients/node/protos/ (the package loads
  them at run time with @grpc/proto-loader and protobufjs), then `npm pack` into clients/dist/.
- Go: the module `covel.dev/api` (clients/go, with the stubs protoc-gen-go and protoc-gen-go-grpc generate at the
  package's `go_package` path) written as a Go module proxy into clients/dist/goproxy/ (the GOPROXY protocol's
  files: `@v/list`, `.info`, `.mod`, `.zip`), which `go get` resolves from a file:// path or any static HTTPS host.

`python clients/build.py [--out DIR]`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
PUBLIC = PROTOS / "covel" / "scheduler" / "v1"
PYTHON = ROOT / "clients" / "python"
NODE = ROOT / "clients" / "node"
GO = ROOT / "clients" / "go"
GO_MODULE = "covel.dev/api"
GENERATED = PYTHON / "src" / "covel_client" / "v1"
# A generated module's import of another of the package ("from covel.scheduler.v1 import resources_pb2 as ...").
ABSOLUTE = re.compile(r"^from covel\.scheduler\.v1 import ", re.MULTILINE)


def generate_python(target: Path = GENERATED) -> Path:
    """The public package's Python modules (and .pyi stubs) in `target`, importing each other relatively."""
    with tempfile.TemporaryDirectory() as scratch:
        protos = [str(path.relative_to(PROTOS)) for path in sorted(PUBLIC.glob("*.proto"))]
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTOS}", f"--python_out={scratch}", f"--grpc_python_out={scratch}",
                        f"--mypy_out={scratch}", f"--mypy_grpc_out={scratch}", *protos], check=True,
                       env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for module in sorted((Path(scratch) / "covel" / "scheduler" / "v1").iterdir()):
            (target / module.name).write_text(ABSOLUTE.sub("from . import ", module.read_text(encoding="utf-8")), encoding="utf-8")
        (target / "__init__.py").write_text('"""Generated from protos/covel/scheduler/v1 by clients/build.py: never edit."""\n', encoding="utf-8")
    return target


def build_python_wheel(out: Path) -> Path:
    """clients/python as a wheel in `out` (its messages generated first)."""
    generate_python()
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(PYTHON)], check=True)
    shutil.rmtree(PYTHON / "build", ignore_errors=True)
    return next(out.glob("covel_client-*.whl"))


def build_node_package(out: Path) -> Path:
    """clients/node packed (`npm pack`) into `out`, its protos copied in first."""
    shutil.rmtree(NODE / "protos", ignore_errors=True)
    shutil.copytree(PUBLIC, NODE / "protos" / "covel" / "scheduler" / "v1")
    shutil.copytree(PROTOS / "google" / "rpc", NODE / "protos" / "google" / "rpc")
    out.mkdir(parents=True, exist_ok=True)
    packed = subprocess.run(["npm", "pack", "--silent", "--pack-destination", str(out)], cwd=NODE, check=True, capture_output=True, text=True)
    return out / packed.stdout.strip().splitlines()[-1]


def client_version() -> str:
    """The version every client package carries (clients/python/pyproject.toml's; the Node package's is the same)."""
    return str(tomllib.loads((PYTHON / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


def go_module_files(target: Path) -> Path:
    """The module covel.dev/api in `target`: clients/go with the public package's stubs generated into it."""
    shutil.copytree(GO, target, dirs_exist_ok=True)
    protos = [str(path.relative_to(PROTOS)) for path in sorted(PUBLIC.glob("*.proto"))]
    subprocess.run(["protoc", f"-I{PROTOS}", f"--go_out={target}", f"--go_opt=module={GO_MODULE}", f"--go-grpc_out={target}",
                    f"--go-grpc_opt=module={GO_MODULE}", *protos], check=True)
    return target


def build_go_proxy(out: Path) -> Path:
    """The Go module as a module proxy in `out`/goproxy: `GOPROXY=file://<it> go get covel.dev/api@v<version>`."""
    version = f"v{client_version()}"
    versions = out / "goproxy" / GO_MODULE / "@v"
    versions.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        module = go_module_files(Path(scratch) / "module")
        with zipfile.ZipFile(versions / f"{version}.zip", "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(module.rglob("*")):
                if path.is_file():
                    archive.write(path, f"{GO_MODULE}@{version}/{path.relative_to(module).as_posix()}")
        (versions / f"{version}.mod").write_bytes((module / "go.mod").read_bytes())
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    (versions / f"{version}.info").write_text(json.dumps({"Version": version, "Time": stamp}) + "\n", encoding="utf-8")
    listed = set((versions / "list").read_text(encoding="utf-8").split()) if (versions / "list").exists() else set()
    (versions / "list").write_text("".join(f"{v}\n" for v in sorted(listed | {version})), encoding="utf-8")
    return out / "goproxy"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "clients" / "dist")
    args = parser.parse_args(argv)
    print(build_python_wheel(args.out))
    print(build_node_package(args.out))
    print(build_go_proxy(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
