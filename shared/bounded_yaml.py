"""YAML from files others write (plugin manifests, locale files, scripts), parsed within limits.

PyYAML builds aliases as shared objects, so a 1 KB "billion laughs" document is small in memory
until something walks it (a copy, json.dumps, a schema check), and an anchor that refers to
itself (`a: &a [*a]`) makes a cycle that recursion never leaves. Here the node graph is checked
before anything is constructed: at most MAX_BYTES of text, MAX_ALIASES aliases, MAX_NODES
nodes counted with every alias expanded, MAX_DEPTH levels, and no alias inside its own anchor.
A document over a limit raises YamlLimitError, a yaml.YAMLError, so callers that already report
bad YAML report it the same way.
"""

from __future__ import annotations

from typing import Any

import yaml

# libyaml's loader when built in (about 10x faster), with the same safe tag set.
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# What PyYAML's scalar constructors raise for a value their tag cannot read (`2024-13-45`, `!!int abc`, `!!bool maybe`).
_SCALAR_FAILURES = (ValueError, KeyError, AttributeError, IndexError, OverflowError)


class _SafeLoader(_BASE_LOADER):
    """The safe loader, with a scalar its tag cannot read reported as a YAML error at its place."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            return super().construct_object(node, deep=deep)
        try:
            return super().construct_object(node, deep=deep)
        except _SCALAR_FAILURES:
            tag = node.tag.rsplit(":", 1)[-1]
            raise yaml.constructor.ConstructorError(
                None, None, f"`{str(node.value)[:40]}` is not a valid {tag}; quote it to keep it as text", node.start_mark
            ) from None


SAFE_LOADER: Any = _SafeLoader

MAX_BYTES = 1024 * 1024
MAX_ALIASES = 100
MAX_NODES = 100_000
MAX_DEPTH = 64


class YamlLimitError(yaml.YAMLError):
    """The document is over one of the limits; `problem` says which, like PyYAML's own errors."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = None


class _Budget:
    """Walks the node graph once per distinct node; `expanded` memoises each node's expanded size."""

    def __init__(self) -> None:
        self.expanded: dict[int, int] = {}
        self.open: set[int] = set()
        self.aliases = 0

    def size(self, node: yaml.Node, depth: int) -> int:
        key = id(node)
        if key in self.open:
            raise YamlLimitError("an alias refers to the anchor it is inside (a loop); write the value out instead")
        if depth > MAX_DEPTH:
            raise YamlLimitError(f"the document nests deeper than {MAX_DEPTH} levels")
        if key in self.expanded:
            # A node met again is an alias: it costs its whole expanded size again.
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise YamlLimitError(f"the document uses more than {MAX_ALIASES} aliases (`*name`)")
            return self.expanded[key]
        self.open.add(key)
        total = 1 + sum(self.size(child, depth + 1) for child in _children(node))
        self.open.discard(key)
        if total > MAX_NODES:
            raise YamlLimitError(f"the document expands to more than {MAX_NODES} values (aliases counted in full)")
        self.expanded[key] = total
        return total


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_yaml(text: str) -> Any:
    """One YAML document with the safe tag set, within the limits above (None for an empty one)."""
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise YamlLimitError(f"the document is larger than {MAX_BYTES // 1024} KiB")
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _Budget().size(node, 0)
        return loader.construct_document(node)
    except RecursionError:
        # Only the pure-Python composer recurses per level; libyaml stops at its own nesting limit.
        raise YamlLimitError(f"the document nests deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
