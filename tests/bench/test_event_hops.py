"""bench.event_hops measures real hops: three processes, a grpc.aio stream and a unix socket, each event answered."""

from __future__ import annotations

from bench import event_hops


def test_the_floor_is_measured_through_three_processes(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(event_hops, "write_result", lambda name, data: tmp_path / name)
    result = event_hops.main(["--events", "50"])
    assert [row["mode"] for row in result["rows"]] == ["stream", "stream + worker", "stream + worker + thread"]
    assert all(row["event_us"]["n"] == 50 and row["event_us"]["p50"] > 0 for row in result["rows"])
    assert result["floor_ms_for_5_events"] == round(result["rows"][-1]["event_us"]["p50"] * 5 / 1000, 2)
