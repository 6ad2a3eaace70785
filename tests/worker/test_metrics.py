"""The worker's histograms read exactly as prometheus_client's own would."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.registry import Collector

from stream.worker.metrics import BatchHistogram

BUCKETS = (0.001, 0.005, 0.01, 0.5, 1, 60)
# on a bound, between bounds, below the first, above the last
VALUES = [0.0, 0.001, 0.0011, 0.005, 0.3, 1.0, 60, 61, 1e9]


def exposition(histogram: Collector) -> str:
    registry = CollectorRegistry()
    registry.register(histogram)
    return generate_latest(registry).decode()


def reference(values: list[float]) -> str:
    registry = CollectorRegistry()
    histogram = Histogram("latency_seconds", "doc", buckets=BUCKETS, registry=registry)
    for value in values:
        histogram.observe(value)
    # the only series ours leaves out: when the histogram was created
    return generate_latest(registry).decode().split("# HELP latency_seconds_created")[0]


def test_a_batch_of_values_reads_as_the_same_values_observed_one_by_one() -> None:
    ours = BatchHistogram("latency_seconds", "doc", BUCKETS)
    ours.observe_many(VALUES[:4])
    ours.observe_many(iter(VALUES[4:]))
    text = exposition(ours)
    assert text == reference(VALUES)
    assert 'latency_seconds_bucket{le="0.001"} 2.0' in text
    assert 'latency_seconds_bucket{le="1.0"} 6.0' in text
    assert 'latency_seconds_bucket{le="+Inf"} 9.0' in text


def test_no_values_read_as_an_empty_histogram() -> None:
    ours = BatchHistogram("latency_seconds", "doc", BUCKETS)
    ours.observe_many([])
    assert exposition(ours) == reference([])
    ours.observe(0.002)
    assert exposition(ours) == reference([0.002])
