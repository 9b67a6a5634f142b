import pytest

from services.scheduler.execution.json_pointer import PointerError, resolve

DOC = {"a": [10, 20, {"b/c": 1, "m~n": 2}], "": 3}


@pytest.mark.parametrize(("pointer", "value"), [("", DOC), ("/a/0", 10), ("/a/2/b~1c", 1), ("/a/2/m~0n", 2), ("/", 3)])
def test_resolves(pointer, value) -> None:
    assert resolve(DOC, pointer) == value


@pytest.mark.parametrize("pointer", ["/a/01", "/a/+1", "/a/3", "/a/-", "/x", "a", "/a/0/x"])
def test_rejects(pointer) -> None:
    with pytest.raises(PointerError):
        resolve(DOC, pointer)
