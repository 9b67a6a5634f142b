"""Input binding: committed exports (latest, all providers), and values that fail their checks."""

from __future__ import annotations

from services.scheduler.execution.inputs import CommittedExports, Export, bind_inputs
from shared.manifest import CompiledManifest
from tests.scheduler.compiled import compiled_package


class SchemaCheck:
    """Exports must be objects with an integer `turn`; bound values must not be "bad"."""

    def provider(self, binding, spec, full):
        ok = isinstance(full, dict) and isinstance(full.get("turn"), int)
        return None if ok or spec.scope != "committed" else f"input {binding}: the export fails its contract"

    def value(self, binding, spec, value):
        return f"input {binding}: input-schema-invalid" if value == "bad" else None


def inputs(**bindings) -> CompiledManifest:
    """The compiled manifest of p/consumer with these io.inputs; the runtimes they name are in its package."""
    named = {spec["from"]["runtime"] for spec in bindings.values() if "runtime" in spec["from"]}
    package = compiled_package("p", {"p/consumer": {"io": {"inputs": bindings}}, **{runtime_id: {} for runtime_id in named}})
    return next(runtime.manifest for runtime in package.runtimes if runtime.runtime_id == "p/consumer")


EXPORTS = CommittedExports(
    [
        Export("p", "latest", "p/b", {"turn": 3}, logical_turn=3),
        Export("p", "latest", "p/a", {"turn": 5}, logical_turn=5),
        Export("p", "other", "p/a", {"turn": 9}, logical_turn=9),
        Export("q", "latest", "q/c", {"turn": "not a number"}, logical_turn=7),
    ],
    {"note@1": {"p/a", "p/b"}, "broken@1": {"q/c"}},
)


def test_committed_inputs_read_the_latest_matching_export_or_all_sorted_by_runtime() -> None:
    manifest = inputs(
        one={"from": {"contract": "note@1"}, "scope": "committed", "recordAs": "latest"},
        every={"from": {"contract": "note@1", "cardinality": "all"}, "scope": "committed", "recordAs": "latest"},
        by_runtime={"from": {"runtime": "p/a"}, "scope": "committed", "recordAs": "other"},
        none={"from": {"runtime": "p/zzz"}, "scope": "committed", "recordAs": "latest"},
    )
    bound = bind_inputs(manifest, {}, {}, committed=EXPORTS)
    assert bound == {"one": {"value": {"turn": 5}}, "every": {"value": [{"turn": 5}, {"turn": 3}]}, "by_runtime": {"value": {"turn": 9}}}


def test_a_committed_input_without_exports_is_not_bound() -> None:
    manifest = inputs(previous={"from": {"runtime": "p/a"}, "scope": "committed", "recordAs": "latest"})
    assert bind_inputs(manifest, {}, {}) == {}, "no exports were read"


def test_values_that_fail_their_checks_are_left_out_and_reported() -> None:
    manifest = inputs(
        broken={"from": {"contract": "broken@1"}, "scope": "committed", "recordAs": "latest", "required": False},
        picky={"from": {"runtime": "p/up"}, "select": "/word", "required": False},
        fine={"from": {"runtime": "p/up"}, "select": "/other"},
    )
    rejected: dict[str, str] = {}
    bound = bind_inputs(manifest, {"p/up": {"word": "bad", "other": "good"}}, {}, committed=EXPORTS, check=SchemaCheck(), rejected=rejected)
    assert bound == {"fine": {"value": "good"}}
    assert rejected == {"broken": "input broken: the export fails its contract", "picky": "input picky: input-schema-invalid"}


def test_turn_inputs_of_cardinality_all_bind_every_provider_with_a_value_sorted_by_runtime_id() -> None:
    manifest = inputs(
        every={"from": {"contract": "note@1", "cardinality": "all"}},
        selected={"from": {"contract": "note@1", "cardinality": "all"}, "select": "/word"},
        one={"from": {"contract": "note@1"}},
    )
    # Completion order z, a, m; m has no /word, so it is left out of the selected array.
    outputs = {"p/z": {"word": "zed"}, "p/a": {"word": "ay"}, "p/m": {"other": 1}}
    providers = {"note@1": ["p/z", "p/a", "p/m", "p/failed"]}
    bound = bind_inputs(manifest, outputs, providers)
    assert bound["every"] == {"value": [{"word": "ay"}, {"other": 1}, {"word": "zed"}]}
    assert bound["selected"] == {"value": ["ay", "zed"]}
    assert bound["one"] == {"value": {"word": "zed"}}, "cardinality one: the first provider to finish"


def test_accepts_of_cardinality_all_checks_the_whole_array() -> None:
    class ArrayCheck:
        def provider(self, binding, spec, full):
            return None

        def value(self, binding, spec, value):
            return f"input {binding}: input-schema-invalid (maxItems 1)" if isinstance(value, list) and len(value) > 1 else None

    manifest = inputs(every={"from": {"contract": "note@1", "cardinality": "all"}, "required": False})
    rejected: dict[str, str] = {}
    bound = bind_inputs(manifest, {"p/a": {"n": 1}, "p/b": {"n": 2}}, {"note@1": ["p/a", "p/b"]}, check=ArrayCheck(), rejected=rejected)
    assert bound == {} and rejected == {"every": "input every: input-schema-invalid (maxItems 1)"}
