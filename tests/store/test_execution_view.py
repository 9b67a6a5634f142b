"""The in-execution view of plugin data, and that it equals what the commit stores."""

from __future__ import annotations

import pytest

from shared.plugin_data.execution_view import BufferedWrite, ExecutionView
from shared.plugin_data.operations import MISSING, OperationError
from tests.store.helpers import commit_turn, new_session, plugin_data, proposal


def data(runtime: str, namespace: str, key: str, value) -> BufferedWrite:
    return BufferedWrite(runtime, "plugin.data", {"namespace": namespace, "key": key, "value": value})


def update(runtime: str, namespace: str, key: str, *operations) -> BufferedWrite:
    return BufferedWrite(runtime, "plugin.data.update", {"namespace": namespace, "key": key, "operations": list(operations)})


def delete(runtime: str, namespace: str, key: str) -> BufferedWrite:
    return BufferedWrite(runtime, "plugin.data.delete", {"namespace": namespace, "key": key})


COMMITTED = {("inv", "gold"): {"n": 5}, ("inv", "rope"): 1, ("notes", "a"): "x"}
UPSTREAM = [
    data("planner", "inv", "gold", {"n": 10}),
    update("tracker", "inv", "gold", {"op": "inc", "path": "/n", "by": 2}),
    BufferedWrite("batcher", "plugin.data.batch", {"entries": [{"namespace": "notes", "key": "b", "value": "y"}]}),
    delete("cleaner", "inv", "rope"),
]


def test_get_stacks_upstream_then_own_and_depends_on_what_still_counts():
    view = ExecutionView(COMMITTED, UPSTREAM, own=[update("me", "inv", "gold", {"op": "inc", "path": "/n"})])
    assert view.get("inv", "gold") == ({"n": 13}, {"planner", "tracker"})
    assert view.get("inv", "rope") == (MISSING, {"cleaner"})
    assert view.get("notes", "a") == ("x", set())
    assert view.get("nowhere", "k") == (MISSING, set())


def test_a_whole_write_of_its_own_drops_the_upstream_dependency():
    view = ExecutionView(COMMITTED, UPSTREAM, own=[data("me", "inv", "gold", {"n": 0}), update("me", "inv", "gold", {"op": "inc", "path": "/n"})])
    assert view.get("inv", "gold") == ({"n": 1}, set())
    view = ExecutionView(COMMITTED, UPSTREAM, own=[delete("me", "inv", "gold")])
    assert view.get("inv", "gold") == (MISSING, set())
    # An upstream whole write hides the upstream writes before it.
    view = ExecutionView(COMMITTED, [update("a", "inv", "gold", {"op": "inc", "path": "/n"}), data("b", "inv", "gold", 1)])
    assert view.get("inv", "gold") == (1, {"b"})


def test_list_depends_on_every_upstream_writer_of_the_namespace():
    view = ExecutionView(COMMITTED, UPSTREAM)
    assert view.list("inv") == ({("inv", "gold"): {"n": 12}}, {"planner", "tracker", "cleaner"})
    entries, depends = view.list()
    assert entries == {("inv", "gold"): {"n": 12}, ("notes", "a"): "x", ("notes", "b"): "y"}
    assert depends == {"planner", "tracker", "batcher", "cleaner"}


def test_a_buffered_update_that_cannot_apply_fails_early():
    view = ExecutionView(COMMITTED, [], own=[update("me", "notes", "a", {"op": "inc"})])
    with pytest.raises(OperationError, match="not a number"):
        view.get("notes", "a")


async def test_the_view_equals_what_the_commit_stores(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, [proposal("plugin.data", {"namespace": ns, "key": key, "value": value}) for (ns, key), value in COMMITTED.items()])
    own = [update("me", "inv", "gold", {"op": "inc", "path": "/n"}), update("me", "inv", "list", {"op": "append", "path": "/x", "value": 1})]
    writes = [*UPSTREAM, *own]
    await commit_turn(stub, session.id, [proposal(write.type, dict(write.payload), runtime_id=write.runtime_id) for write in writes])
    entries, _ = ExecutionView(COMMITTED, UPSTREAM, own).list()
    assert await plugin_data(stub, session.id) == entries
