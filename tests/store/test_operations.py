"""plugin.data.update operations as pure functions (no server, no database)."""

from __future__ import annotations

import pytest

from shared.plugin_data.operations import DELETED, MISSING, OperationError, apply_operations, json_size


def apply(current, *operations):
    return apply_operations(current, list(operations))


def test_set_whole_value_and_nested_paths_creating_objects():
    assert apply(MISSING, {"op": "set", "path": "", "value": {"a": 1}}) == {"a": 1}
    assert apply(MISSING, {"op": "set", "path": "/a/b", "value": 2}) == {"a": {"b": 2}}
    assert apply({"list": [1, 2]}, {"op": "set", "path": "/list/1", "value": 9}) == {"list": [1, 9]}
    assert apply({"list": [1]}, {"op": "set", "path": "/list/-", "value": 5}) == {"list": [1, 5]}
    assert apply({}, {"op": "set", "path": "/a~1b/c~0d", "value": 1}) == {"a/b": {"c~d": 1}}
    with pytest.raises(OperationError, match=r"operations\[0\] \(set\).*out of range"):
        apply({"list": [1]}, {"op": "set", "path": "/list/3", "value": 0})


def test_merge_is_json_merge_patch():
    current = {"a": 1, "b": {"c": 1, "d": 2}, "e": 3}
    patched = apply(current, {"op": "merge", "value": {"a": 5, "b": {"d": None, "x": 1}, "e": None}})
    assert patched == {"a": 5, "b": {"c": 1, "x": 1}}
    assert current["b"] == {"c": 1, "d": 2}  # the input is never changed
    assert apply(MISSING, {"op": "merge", "path": "/p", "value": {"k": 1}}) == {"p": {"k": 1}}
    with pytest.raises(OperationError, match="not an object"):
        apply({"p": [1]}, {"op": "merge", "path": "/p", "value": {}})
    with pytest.raises(OperationError, match="value must be an object"):
        apply({}, {"op": "merge", "value": [1]})


def test_inc_starts_at_zero_and_keeps_integers():
    assert apply(MISSING, {"op": "inc", "path": "/gold"}) == {"gold": 1}
    assert apply({"gold": 3}, {"op": "inc", "path": "/gold", "by": -5}) == {"gold": -2}
    assert apply({"gold": 3}, {"op": "inc", "path": "/gold", "by": 0.5}) == {"gold": 3.5}
    assert apply(7, {"op": "inc", "by": 2}) == 9
    with pytest.raises(OperationError, match="not a number"):
        apply({"gold": "3"}, {"op": "inc", "path": "/gold"})
    with pytest.raises(OperationError, match="by must be a number"):
        apply({}, {"op": "inc", "path": "/gold", "by": True})


def test_append_insert_remove():
    value = apply(MISSING, {"op": "append", "path": "/items", "value": "a"}, {"op": "append", "path": "/items", "value": "c"})
    assert value == {"items": ["a", "c"]}
    value = apply(value, {"op": "insert", "path": "/items", "index": 1, "value": "b"}, {"op": "insert", "path": "/items", "index": 3, "value": "d"})
    assert value["items"] == ["a", "b", "c", "d"]
    assert apply(value, {"op": "remove", "path": "/items", "index": 0})["items"] == ["b", "c", "d"]
    assert apply({"x": [1, 2, 1]}, {"op": "remove", "path": "/x", "value": 1}) == {"x": [2]}
    people = [{"id": "a", "side": "red"}, {"id": "b", "side": "blue"}]
    assert apply({"p": people}, {"op": "remove", "path": "/p", "match": {"side": "red"}}) == {"p": [people[1]]}
    assert apply(MISSING, {"op": "remove", "path": "/nothing", "value": 1}) is MISSING
    with pytest.raises(OperationError, match="index must be an integer from 0 to 4"):
        apply(value, {"op": "insert", "path": "/items", "index": 9, "value": "z"})
    with pytest.raises(OperationError, match="exactly one"):
        apply(value, {"op": "remove", "path": "/items", "index": 0, "value": "a"})
    with pytest.raises(OperationError, match="not an array"):
        apply({"n": 1}, {"op": "append", "path": "/n", "value": 1})


def test_upsert_item_replaces_by_key_or_appends():
    value = {"q": [{"id": "a", "n": 1}, {"id": "b", "n": 2}]}
    value = apply(value, {"op": "upsertItem", "path": "/q", "value": {"id": "b", "n": 20}})
    value = apply(value, {"op": "upsertItem", "path": "/q", "value": {"id": "c", "n": 3}})
    assert value == {"q": [{"id": "a", "n": 1}, {"id": "b", "n": 20}, {"id": "c", "n": 3}]}
    assert apply(MISSING, {"op": "upsertItem", "value": {"name": "x"}, "key": "name"}) == [{"name": "x"}]
    with pytest.raises(OperationError, match="with a 'id' member"):
        apply(value, {"op": "upsertItem", "path": "/q", "value": {"n": 1}})


def test_delete_members_items_and_the_entry():
    assert apply({"a": 1, "b": 2}, {"op": "delete", "path": "/a"}) == {"b": 2}
    assert apply({"a": [1, 2]}, {"op": "delete", "path": "/a/0"}) == {"a": [2]}
    assert apply({"a": 1}, {"op": "delete", "path": "/missing/deeper"}) == {"a": 1}
    assert apply({"a": 1}, {"op": "delete"}) is DELETED
    assert apply({"a": 1}, {"op": "delete"}, {"op": "set", "path": "/b", "value": 1}) == {"b": 1}


def test_operations_apply_in_order_and_errors_name_the_position():
    operations = [
        {"op": "set", "value": {"hp": 10, "log": []}},
        {"op": "inc", "path": "/hp", "by": -3},
        {"op": "append", "path": "/log", "value": "hit"},
        {"op": "merge", "value": {"status": "hurt"}},
    ]
    assert apply_operations(MISSING, operations) == {"hp": 7, "log": ["hit"], "status": "hurt"}
    with pytest.raises(OperationError) as caught:
        apply_operations({"hp": 1}, [{"op": "inc", "path": "/hp"}, {"op": "teleport"}])
    assert caught.value.index == 1
    for bad in ({"op": "set"}, {"op": "set", "value": 1, "path": "a"}, {"op": "inc", "extra": 1}, "set"):
        with pytest.raises(OperationError):
            apply_operations({}, [bad])


def test_json_size_counts_utf8_bytes():
    assert json_size({"a": "é"}) == len('{"a":"é"}'.encode())


def test_operations_never_change_their_input_or_share_its_containers():
    current = {"hp": 1, "log": [{"hit": 1}], "tags": ["a"]}
    value = {"nested": {"list": [1, {"deep": True}]}}
    operations = [{"op": "append", "path": "/log", "value": value}, {"op": "inc", "path": "/hp"},
                  {"op": "merge", "path": "/log/0", "value": {"miss": 2}}, {"op": "set", "path": "/tags/-", "value": value}]
    result = apply_operations(current, operations)
    assert current == {"hp": 1, "log": [{"hit": 1}], "tags": ["a"]}
    assert result == {"hp": 2, "log": [{"hit": 1, "miss": 2}, value], "tags": ["a", value]}
    result["log"][1]["nested"]["list"].append(3)
    result["tags"][1]["nested"]["list"][1]["deep"] = False
    assert value == {"nested": {"list": [1, {"deep": True}]}}
