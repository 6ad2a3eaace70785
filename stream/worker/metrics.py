"""The worker's Prometheus metrics: counters read from the same Tally the JSON endpoint serves,
gauges read at scrape time, and latency histograms observed per batch."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from stream.engine.tally import Tally

# A batch takes milliseconds when the broker is near; seconds mean trouble.
_SECONDS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


@dataclass
class Readings:
    """What the collector reads at scrape time; each a cheap callable."""

    tally: Tally
    outputs_by_topic: Callable[[], dict[str, int]]
    table_sizes: Callable[[], tuple[int, int]]
    lag_by_partition: Callable[[], dict[int, int]]


class WorkerCollector(Collector):
    """Metric families built from the readings at scrape time, so nothing is counted twice."""

    def __init__(self, readings: Readings) -> None:
        self._readings = readings

    def collect(self) -> Iterator[Metric]:
        tally = self._readings.tally
        records = CounterMetricFamily(
            "session_stream_records", "Input records by outcome", labels=["outcome"]
        )
        records.add_metric(["in"], tally.entries_in)
        records.add_metric(["kept"], tally.kept)
        records.add_metric(["dropped"], tally.dropped)
        records.add_metric(["dead_lettered"], tally.dead_lettered)
        yield records
        outputs = CounterMetricFamily(
            "session_stream_output_records", "Records sent, by topic", labels=["topic"]
        )
        for topic, count in sorted(self._readings.outputs_by_topic().items()):
            outputs.add_metric([topic], count)
        yield outputs
        dropped = CounterMetricFamily(
            "session_stream_dropped", "Dropped entries by rule", labels=["rule"]
        )
        for rule, count in sorted(tally.dropped_by_rule.items()):
            dropped.add_metric([rule], count)
        yield dropped
        alerts = CounterMetricFamily(
            "session_stream_alerts", "Alerts by kind and severity", labels=["kind", "severity"]
        )
        for (kind, severity), count in sorted(tally.alerts_by_kind_severity.items()):
            alerts.add_metric([kind, severity], count)
        yield alerts
        sessions, memory = self._readings.table_sizes()
        tables = GaugeMetricFamily("session_stream_table_keys", "Table keys", labels=["table"])
        tables.add_metric(["sessions"], sessions)
        tables.add_metric(["memory"], memory)
        yield tables
        lag = GaugeMetricFamily(
            "session_stream_consumer_lag",
            "Input records not yet processed, by assigned partition",
            labels=["partition"],
        )
        for partition, behind in sorted(self._readings.lag_by_partition().items()):
            lag.add_metric([str(partition)], behind)
        yield lag


class BatchHistogram(Collector):
    """A histogram that takes a batch's values at once. prometheus_client's Histogram takes
    a lock and walks its buckets in Python for every value, and the worker observes every
    record. Observed and scraped on the worker's event loop only, so it takes no lock."""

    def __init__(self, name: str, documentation: str, buckets: Iterable[float]) -> None:
        self._name = name
        self._documentation = documentation
        self._bounds = sorted(buckets)
        # per bucket, the values at most its bound and above the one before; the last: +Inf
        self._counts = [0] * (len(self._bounds) + 1)
        self._sum = 0.0

    def observe(self, value: float) -> None:
        self.observe_many((value,))

    def observe_many(self, values: Iterable[float]) -> None:
        counts, bounds, where = self._counts, self._bounds, bisect.bisect_left
        total = self._sum
        for value in values:
            counts[where(bounds, value)] += 1
            total += value
        self._sum = total

    def collect(self) -> Iterator[Metric]:
        cumulative, running = [], 0
        bounds = [*map(floatToGoString, self._bounds), "+Inf"]
        for bound, count in zip(bounds, self._counts, strict=True):
            running += count
            cumulative.append((bound, running))
        yield HistogramMetricFamily(self._name, self._documentation, buckets=cumulative,
                                    sum_value=self._sum)


class WorkerMetrics:
    def __init__(self, readings: Readings) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(WorkerCollector(readings))
        self.batch_seconds = BatchHistogram(
            "session_stream_batch_seconds",
            "Time to process a batch and deliver its outputs",
            _SECONDS,
        )
        self.record_latency = BatchHistogram(
            "session_stream_record_latency_seconds",
            "Time from a record's timestamp to the delivery of its outputs",
            _SECONDS,
        )
        # Together they tell what a delivery costs the overlap of one batch's delivery with
        # the next batch's processing: the lane waits only for what the processing did not
        # cover (docs/performance.md has both guarantees' figures).
        self.delivery_seconds = BatchHistogram(
            "session_stream_delivery_seconds",
            "Time to deliver a batch's outputs and changelog (exactly once: its transactions)",
            _SECONDS,
        )
        self.commit_wait_seconds = BatchHistogram(
            "session_stream_commit_wait_seconds",
            "Time the lane waited, its batch processed, for the batch before to be committed",
            _SECONDS,
        )
        for histogram in (self.batch_seconds, self.record_latency, self.delivery_seconds,
                          self.commit_wait_seconds):
            self.registry.register(histogram)

    def text(self) -> bytes:
        return generate_latest(self.registry)
