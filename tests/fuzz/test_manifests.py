"""Generated PLUGIN.md / RUNTIME.md documents through the registry's loader: valid packages with their
frontmatter mutated (wrong types, unknown fields, huge and deep values, shared values that YAML writes
as anchors and aliases, hostile YAML, odd unicode, other encodings). Each load ends, quickly, in a
LoadedPackage the registry can serve, with an error diagnostic when it failed; never an exception."""

from __future__ import annotations

import datetime
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from services.registry.loaded_package import PackageState
from services.registry.package_loader import load_package
from services.registry.proto_mapping import package_to_proto
from shared.settings import REPO_ROOT
from tests.fuzz.profiles import fuzzed
from tests.fuzz.proto_strategies import ODD_STRINGS

SEED_PACKAGES = [REPO_ROOT / "tests" / "registry" / "fixtures" / "good" / "journal", REPO_ROOT / "plugins" / "narrator",
                 REPO_ROOT / "plugins" / "memory", REPO_ROOT / "plugins" / "dice-check"]
# A load of a package within the YAML limits (shared/bounded_yaml.py) takes well under this, even here.
LOAD_LIMIT_S = 10.0
FIELD_NAMES = ["id", "kind", "version", "runtime", "schedule", "stage", "agent", "function", "io", "inputs", "output",
               "contributes", "tools", "hooks", "datasets", "schema", "provides", "requires", "entry", "settings", "Kind", "x-extra"]


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


HOSTILE_VALUES = st.one_of(
    st.sampled_from([None, True, 0, -1, 2**64, 10**400, float("nan"), float("inf"), "", "x" * 1_100_000, [], {},
                     datetime.date(2024, 2, 29), b"\x00\xff", {1: "int key", None: "null key"}]),
    st.sampled_from(ODD_STRINGS),
    st.builds(_deep, st.sampled_from([10, 63, 65, 200])),
    st.builds(lambda count: ["item"] * count, st.sampled_from([5, 1000])),
    st.recursive(st.one_of(st.integers(), st.text(max_size=12), st.booleans(), st.none()),
                 lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(st.sampled_from(FIELD_NAMES), children, max_size=3)),
                 max_leaves=8),
)
# Appended to the frontmatter as text: what no dump of plain data writes.
HOSTILE_YAML = [
    "loop: &loop [*loop]", "a: &a x\nb: *a\nc: *a", "<<: {kind: core}", "kind: plugin\nkind: core", "x: !!python/object/apply:os.system [id]",
    "x: !!binary aGVsbG8=", "x: !!set {a, b}", "x: !custom 1", "x: !!timestamp 2024-13-45", "\tkey: tab", "x: [unclosed", "? [complex, key]\n: v",
    "x: 0x1F\ny: 0o17\nz: 1_000", "big: [" + "1, " * 110_000 + "1]", "x: *undefined", "%YAML 1.1", "x: |\n  block\n   text", "x: 'a''b'", "x: \"\\ud800\"",
    "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]\n" for n in range(1, 7)),
]
ENCODINGS = ["utf-8", "utf-8", "utf-8", "utf-8-sig", "utf-16", "latin-1", "cp1252"]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a parsed frontmatter: keys of mappings, indexes of lists."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _parent(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        data = data[step]
    return data


@st.composite
def mutated_frontmatter(draw: st.DrawFn, data: dict[str, Any]) -> dict[str, Any]:
    for _ in range(draw(st.integers(1, 5))):
        path = draw(st.sampled_from(_paths(data)))
        operation = draw(st.sampled_from(["replace", "replace", "delete", "add-field", "share", "wrap"]))
        if not path:
            data[draw(st.sampled_from(FIELD_NAMES))] = draw(HOSTILE_VALUES)
            continue
        parent, step = _parent(data, path), path[-1]
        if operation == "replace":
            parent[step] = draw(HOSTILE_VALUES)
        elif operation == "delete":
            del parent[step]
        elif operation == "add-field" and isinstance(parent[step], dict):
            parent[step][draw(st.sampled_from(FIELD_NAMES))] = draw(HOSTILE_VALUES)
        elif operation == "share":
            # The same object in two places: PyYAML writes an anchor and an alias.
            data[draw(st.sampled_from(FIELD_NAMES))] = parent[step]
        elif operation == "wrap":
            parent[step] = [parent[step]] if draw(st.booleans()) else {"value": parent[step]}
    return data


def _split(text: str) -> tuple[dict[str, Any], str]:
    _, frontmatter, body = text.split("---\n", 2)
    return yaml.safe_load(frontmatter) or {}, body


@st.composite
def manifest_bytes(draw: st.DrawFn, original: str) -> bytes:
    """`original` (a PLUGIN.md / RUNTIME.md) with its frontmatter mutated, dumped, perhaps spoilt as text, encoded."""
    data, body = _split(original)
    data = draw(mutated_frontmatter(data))
    try:
        frontmatter = yaml.safe_dump(data, allow_unicode=draw(st.booleans()), sort_keys=False, default_flow_style=draw(st.sampled_from([None, True, False])))
    except (yaml.YAMLError, RecursionError):
        frontmatter = json.dumps(data, default=str)  # JSON is YAML too
    if draw(st.booleans()):
        frontmatter += "\n" + draw(st.sampled_from(HOSTILE_YAML)) + "\n"
    text = f"---\n{frontmatter}---\n{body}"
    spoil = draw(st.sampled_from(["none", "none", "crlf", "no-closing-fence", "fence-in-body", "nul", "bom"]))
    text = {"crlf": text.replace("\n", "\r\n"), "no-closing-fence": text.replace("\n---\n", "\n", 1), "fence-in-body": text + "\n---\nx: 1\n---\n",
            "nul": text.replace(":", ":\x00", 1), "bom": "\ufeff" + text}.get(spoil, text)
    encoding = draw(st.sampled_from(ENCODINGS))
    encoded = text.encode(encoding, errors="surrogatepass" if encoding.startswith("utf") else "replace")
    if draw(st.integers(0, 9)) == 0:
        position = draw(st.integers(0, len(encoded)))
        encoded = encoded[:position] + b"\xff\xfe\xc0" + encoded[position:]
    return encoded


def _runtime_files(package: Path) -> list[Path]:
    return sorted(package.glob("runtimes/*/RUNTIME.md"))


@fuzzed(short=25, long=2000)
@given(data=st.data())
def test_mutated_manifests_load_to_a_package_with_diagnostics(data) -> None:
    seed = data.draw(st.sampled_from(SEED_PACKAGES), label="seed")
    targets = [seed / "PLUGIN.md", *_runtime_files(seed)]
    target = data.draw(st.sampled_from(targets), label="file")
    written = data.draw(manifest_bytes(target.read_text(encoding="utf-8")), label="manifest")
    strict = data.draw(st.booleans(), label="strict")
    with tempfile.TemporaryDirectory(prefix="covel-fuzz-") as folder:
        package_root = Path(folder) / seed.name
        shutil.copytree(seed, package_root, ignore=shutil.ignore_patterns("__pycache__"))
        (package_root / target.relative_to(seed)).write_bytes(written)
        started = time.monotonic()
        package = load_package(package_root, source="community", strict=strict)
        took = time.monotonic() - started
        served = package_to_proto(package)  # what ListPlugins sends for it, loaded or failed
    assert took < LOAD_LIMIT_S, f"the load took {took:.1f} s"
    assert package.state in (PackageState.LOADED, PackageState.FAILED)
    assert served.id == seed.name
    if package.state is PackageState.FAILED:
        assert any(diagnostic.is_error for diagnostic in package.diagnostics), "a failed package says why"
    for diagnostic in package.diagnostics:
        assert diagnostic.code and isinstance(diagnostic.message, str) and isinstance(diagnostic.field_path, str)
