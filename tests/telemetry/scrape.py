"""Reading a service's Prometheus /metrics page in tests."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple], float]


def scrape(port: int) -> Samples:
    """Every sample on http://127.0.0.1:<port>/metrics, keyed by (name, sorted labels)."""
    reply = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    assert reply.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
    }


def metric_value(samples: Samples, name: str, **labels) -> float:
    """The sum over the samples of `name` whose labels include `labels`."""
    return sum(value for (sample, sample_labels), value in samples.items()
               if sample == name and labels.items() <= dict(sample_labels).items())
