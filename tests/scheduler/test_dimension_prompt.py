"""The framework's default dimension segment of a story's prompt: each dimension's name and current value, bookkeeping
removed, within its budget; `dimensions-truncated` when something was cut."""

from __future__ import annotations

from covel.store.v1 import store_pb2
from services.scheduler.agent.dimension_prompt import CHARS_SHOWN, VALUE_CHARS, dimension_segment
from shared.structs import to_struct, to_value


def world(**values) -> store_pb2.GetWorldResponse:
    return store_pb2.GetWorldResponse(dimensions=[
        store_pb2.Dimension(id=key, name=key.title(), schema=to_struct({}), value=to_value(value), version=1) for key, value in values.items()])


def test_each_dimension_is_a_line_of_its_name_and_value() -> None:
    [segment] = dimension_segment(world(lighthouse="dark", boats={"missing": 2, "updatedAt": "2026-01-02T03:04:05Z"}), "en")
    assert (segment["id"], segment["pluginId"], segment["position"]) == ("dimensions", "framework", "system")
    assert segment["content"].splitlines()[1:] == ["- Lighthouse: dark", '- Boats: {"missing":2}']
    assert dimension_segment(world(), "en") == [] and dimension_segment(None, "en") == []
    assert dimension_segment(world(tide="low"), "zh")[0]["content"].startswith("世界现状")


def test_a_long_value_or_too_many_are_cut_and_the_id_says_so() -> None:
    [long] = dimension_segment(world(chronicle="x" * (VALUE_CHARS * 2)), "en")
    assert long["id"] == "dimensions-truncated" and len(long["content"].splitlines()[1]) < VALUE_CHARS + 20
    many = world(**{f"d{index:03}": "y" * 100 for index in range(CHARS_SHOWN // 50)})
    [cut] = dimension_segment(many, "en")
    assert cut["id"] == "dimensions-truncated" and len(cut["content"]) <= CHARS_SHOWN + 200
