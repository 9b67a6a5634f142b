"""A Go module of the test's own that requires covel.dev/api, built offline: what the module needs besides itself
(gRPC, protobuf, genproto's rpc, x/net, x/sys, x/text) comes from Debian's Go sources (/usr/share/gocode, which
`make test` installs) through `replace` lines, each folder given a go.mod of its own that names the others (Debian's
go.mod files name versions of modules this machine does not have). covel.dev/api itself is left to the resolver:
GOPROXY must serve it."""

from __future__ import annotations

from pathlib import Path

DEBIAN_GO = Path("/usr/share/gocode/src")
# module path -> its source folder under DEBIAN_GO
MIRRORED = {
    "google.golang.org/grpc": "google.golang.org/grpc",
    "google.golang.org/protobuf": "google.golang.org/protobuf",
    "google.golang.org/genproto/googleapis/rpc": "google.golang.org/genproto/googleapis/rpc",
    "github.com/golang/protobuf": "github.com/golang/protobuf",
    "golang.org/x/net": "golang.org/x/net",
    "golang.org/x/sys": "golang.org/x/sys",
    "golang.org/x/text": "golang.org/x/text",
}
# The version Go's tools give a module that only a replace line provides.
PLACEHOLDER = "v0.0.0-00010101000000-000000000000"


def _requires(modules: dict[str, str]) -> str:
    return "require (\n" + "".join(f"\t{module} {version}\n" for module, version in sorted(modules.items())) + ")\n"


def _mirror(module: str, folder: Path) -> Path:
    """Debian's sources of `module` seen through `folder`: every entry linked, but a go.mod of our own."""
    folder.mkdir(parents=True)
    for entry in (DEBIAN_GO / MIRRORED[module]).iterdir():
        if entry.name not in ("go.mod", "go.sum", "vendor"):
            (folder / entry.name).symlink_to(entry)
    others = {other: PLACEHOLDER for other in MIRRORED if other != module}
    (folder / "go.mod").write_text(f"module {module}\n\ngo 1.19\n\n{_requires(others)}", encoding="utf-8")
    return folder


def consumer_module(folder: Path, requires: dict[str, str]) -> Path:
    """A module `example.com/covelplay` in `folder` requiring `requires` (module -> version) and the mirrored
    libraries, each replaced by its Debian folder."""
    folder.mkdir(parents=True)
    replaced = {module: _mirror(module, folder.parent / "mirror" / str(index)) for index, module in enumerate(MIRRORED)}
    lines = "".join(f"replace {module} => {path}\n" for module, path in replaced.items())
    modules = {**{module: PLACEHOLDER for module in MIRRORED}, **requires}
    (folder / "go.mod").write_text(f"module example.com/covelplay\n\ngo 1.19\n\n{_requires(modules)}\n{lines}", encoding="utf-8")
    return folder
