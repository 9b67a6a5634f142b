"""The operations of `plugin.data.update`, as pure functions on JSON values.

No database here (and nothing beyond the standard library), so the scheduler's in-execution
view of plugin data can compute exactly what the commit will store: same input, same
operations, same result. `apply_operations(current, operations)` applies them in order to a
copy and returns the new value, or `DELETED` when the entry itself is deleted.

The value an entry holds before the first operation is `MISSING` when the key has no
entry. Each operation is an object `{"op": <kind>, "path": <JSON Pointer>, ...}`:

| op | fields | meaning |
|---|---|---|
| set | path, value | put `value` at path (path "" replaces the whole value) |
| merge | path, value (object) | JSON Merge Patch (RFC 7396) of `value` into the object at path: members are merged recursively, a null member removes that key |
| inc | path, by (number, default 1) | add `by` to the number at path (missing: 0); int + int stays an int |
| append | path, value | add `value` at the end of the array at path (missing: []) |
| insert | path, index, value | insert `value` before position index, 0 <= index <= length (missing: []) |
| remove | path, exactly one of index / value / match | remove from the array at path: the item at index, every item equal to value, or every object item whose members include all of match; a missing or empty array, or no match, removes nothing |
| upsertItem | path, value (object), key (member name, default "id") | in the array of objects at path (missing: []), replace the first item whose `key` member equals value[key], else append value |
| delete | path | remove the member / array item at path (missing: nothing happens); path "" deletes the entry |

Paths are JSON Pointers (RFC 6901: "" is the whole value, "/a/0/b", `~1` for "/" and `~0` for
"~"). Intermediate objects are created by set, merge, inc, append, insert and upsertItem
when members are missing (never array items: an array index must exist). Every other
mismatch (a number where an array is needed, an index out of range, a bad field) raises
`OperationError` naming the operation's position, and nothing is applied.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

OPERATION_KINDS = ("set", "merge", "inc", "append", "insert", "remove", "upsertItem", "delete")
_FIELDS = {
    "set": {"value"},
    "merge": {"value"},
    "inc": {"by"},
    "append": {"value"},
    "insert": {"index", "value"},
    "remove": {"index", "value", "match"},
    "upsertItem": {"value", "key"},
    "delete": set(),
}


class _Sentinel:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Sentinel("MISSING")
DELETED: Any = _Sentinel("DELETED")


class OperationError(ValueError):
    def __init__(self, index: int, op: str, message: str) -> None:
        super().__init__(f"operations[{index}] ({op}): {message}")
        self.index = index
        self.op = op


def parse_pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise ValueError("path must be a JSON Pointer string (\"\" for the whole value)")
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"path {path!r} must be \"\" or start with /")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _index(container: list[Any], part: str, *, allow_end: bool = False) -> int:
    if not part.isdigit() or (len(part) > 1 and part.startswith("0")):
        raise ValueError(f"{part!r} is not an array index")
    position = int(part)
    if position > len(container) or (position == len(container) and not allow_end):
        raise ValueError(f"index {position} is out of range (length {len(container)})")
    return position


def _parent(root: Any, parts: list[str], create: bool) -> tuple[Any, str] | None:
    """The container holding the last part, creating missing objects if `create`; None if absent."""
    node = root
    for part in parts[:-1]:
        if isinstance(node, dict):
            if part not in node or node[part] is None:
                if not create:
                    return None
                node[part] = {}
            node = node[part]
        elif isinstance(node, list):
            node = node[_index(node, part)]
        else:
            raise ValueError(f"cannot descend into {_kind(node)} at {part!r}")
    return node, parts[-1]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if _is_number(value):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _get(container: Any, part: str) -> Any:
    if isinstance(container, dict):
        return container.get(part, MISSING)
    if isinstance(container, list):
        return container[_index(container, part)]
    raise ValueError(f"{_kind(container)} has no member {part!r}")


def _put(container: Any, part: str, value: Any) -> None:
    if isinstance(container, dict):
        container[part] = value
    elif isinstance(container, list):
        container[_index(container, part)] = value
    else:
        raise ValueError(f"cannot set member {part!r} of {_kind(container)}")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396."""
    if not isinstance(patch, dict):
        return json_copy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = merge_patch(result.get(name), value)
    return result


def _matches(item: Any, match: dict[str, Any]) -> bool:
    return isinstance(item, dict) and all(name in item and item[name] == value for name, value in match.items())


def _update(current: Any, kind: str, operation: dict[str, Any]) -> Any:
    """The new value at the path, given the current one (MISSING when absent); never called for delete."""
    if kind in _ARRAY_UPDATES:
        return _ARRAY_UPDATES[kind](_array_copy(current), operation)
    return _VALUE_UPDATES[kind](current, operation)


def _set(current: Any, operation: dict[str, Any]) -> Any:
    return json_copy(operation["value"])


def _merge(current: Any, operation: dict[str, Any]) -> Any:
    patch = operation["value"]
    if not isinstance(patch, dict):
        raise ValueError("value must be an object")
    if current is not MISSING and current is not None and not isinstance(current, dict):
        raise ValueError(f"the target is {_kind(current)}, not an object")
    return merge_patch({} if current is MISSING else current, patch)


def _inc(current: Any, operation: dict[str, Any]) -> Any:
    by = operation.get("by", 1)
    if not _is_number(by):
        raise ValueError("by must be a number")
    base = 0 if current is MISSING or current is None else current
    if not _is_number(base):
        raise ValueError(f"the target is {_kind(base)}, not a number")
    return base + by


def _array_copy(current: Any) -> list[Any]:
    items = [] if current is MISSING or current is None else current
    if not isinstance(items, list):
        raise ValueError(f"the target is {_kind(items)}, not an array")
    return list(items)


def _append(items: list[Any], operation: dict[str, Any]) -> list[Any]:
    items.append(json_copy(operation["value"]))
    return items


def _insert(items: list[Any], operation: dict[str, Any]) -> list[Any]:
    index = operation.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index <= len(items):
        raise ValueError(f"index must be an integer from 0 to {len(items)}")
    items.insert(index, json_copy(operation["value"]))
    return items


def _remove(items: list[Any], operation: dict[str, Any]) -> list[Any]:
    given = [name for name in ("index", "value", "match") if name in operation]
    if len(given) != 1:
        raise ValueError("give exactly one of index, value or match")
    if given == ["index"]:
        index = operation["index"]
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < max(len(items), 1):
            raise ValueError("index must be an integer within the array")
        if items:
            del items[index]
        return items
    if given == ["value"]:
        return [item for item in items if item != operation["value"]]
    match = operation["match"]
    if not isinstance(match, dict) or not match:
        raise ValueError("match must be a non-empty object")
    return [item for item in items if not _matches(item, match)]


def _upsert_item(items: list[Any], operation: dict[str, Any]) -> list[Any]:
    value, key = operation["value"], operation.get("key", "id")
    if not isinstance(key, str) or not key:
        raise ValueError("key must be a member name")
    if not isinstance(value, dict) or key not in value:
        raise ValueError(f"value must be an object with a {key!r} member")
    for position, item in enumerate(items):
        if isinstance(item, dict) and item.get(key) == value[key]:
            items[position] = json_copy(value)
            return items
    items.append(json_copy(value))
    return items


_VALUE_UPDATES: dict[str, Callable[[Any, dict[str, Any]], Any]] = {"set": _set, "merge": _merge, "inc": _inc}
# Array operations get a copy of the array at the path (missing: []).
_ARRAY_UPDATES: dict[str, Callable[[list[Any], dict[str, Any]], list[Any]]] = {
    "append": _append, "insert": _insert, "remove": _remove, "upsertItem": _upsert_item,
}


def validate_operation(index: int, operation: Any) -> tuple[str, list[str]]:
    if not isinstance(operation, dict):
        raise OperationError(index, "?", "must be an object {op, path, ...}")
    kind = operation.get("op")
    if kind not in OPERATION_KINDS:
        raise OperationError(index, str(kind), f"op must be one of {', '.join(OPERATION_KINDS)}")
    unknown = set(operation) - _FIELDS[kind] - {"op", "path"}
    if unknown:
        raise OperationError(index, kind, f"unknown fields {', '.join(sorted(unknown))}")
    required = {"set": ["value"], "merge": ["value"], "append": ["value"], "insert": ["index", "value"], "upsertItem": ["value"]}
    for name in required.get(kind, []):
        if name not in operation:
            raise OperationError(index, kind, f"{name} is required")
    try:
        parts = parse_pointer(operation.get("path", ""))
    except ValueError as error:
        raise OperationError(index, kind, str(error)) from None
    return kind, parts


def apply_operation(value: Any, index: int, operation: dict[str, Any]) -> Any:
    """One operation on `value` (which it may change in place); returns the new root."""
    kind, parts = validate_operation(index, operation)
    try:
        if not parts:
            if kind == "delete":
                return DELETED
            return _update(MISSING if value is MISSING or value is DELETED else value, kind, operation)
        root = value
        if root is MISSING or root is DELETED or root is None:
            if kind in ("delete", "remove"):
                return root
            root = {}
        located = _parent(root, parts, create=kind not in ("delete", "remove"))
        if located is None:
            return root
        container, last = located
        if kind == "delete":
            if isinstance(container, dict):
                container.pop(last, None)
            elif isinstance(container, list):
                if last.isdigit() and int(last) < len(container):
                    del container[_index(container, last)]
            else:
                raise ValueError(f"{_kind(container)} has no member {last!r}")
            return root
        if kind == "set" and isinstance(container, list) and last == "-":
            # set at /array/- appends; any other array item must exist.
            container.append(json_copy(operation["value"]))
            return root
        current = _get(container, last)
        if kind == "remove" and (current is MISSING or current is None):
            return root
        _put(container, last, _update(current, kind, operation))
        return root
    except OperationError:
        raise
    except (ValueError, IndexError, TypeError) as error:
        raise OperationError(index, kind, str(error)) from None


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (objects, arrays, scalars): copy.deepcopy's result, without its
    memo, 3-20x faster (the commit copies every value it updates)."""
    if isinstance(value, dict):
        return {key: json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_copy(item) for item in value]
    return value


def apply_operations(current: Any, operations: Sequence[Any]) -> Any:
    """Apply `operations` in order to a copy of `current` (MISSING when there is no entry).

    Returns the new value, or DELETED when the entry ends deleted. After a root delete a
    later operation starts again from MISSING (so delete then set recreates the entry).
    """
    value = MISSING if current is MISSING else json_copy(current)
    for index, operation in enumerate(operations):
        value = apply_operation(value, index, operation)
    return value


def operation_kinds(operations: Sequence[Any]) -> list[str]:
    return [operation.get("op", "?") if isinstance(operation, dict) else "?" for operation in operations]


def json_size(value: Any) -> int:
    """Bytes of the compact UTF-8 JSON text of `value` (what size limits count)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
