"""The worker's Prometheus metrics: counters read from the same Tally the JSON endpoint serves,
gauges read at scrape time, and latency histograms observed per batch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from stream.accounting import Tally

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


class WorkerMetrics:
    def __init__(self, readings: Readings) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(WorkerCollector(readings))
        self.batch_seconds = Histogram(
            "session_stream_batch_seconds",
            "Time to process a batch and deliver its outputs",
            buckets=_SECONDS,
            registry=self.registry,
        )
        self.record_latency = Histogram(
            "session_stream_record_latency_seconds",
            "Time from a record's timestamp to the delivery of its outputs",
            buckets=_SECONDS,
            registry=self.registry,
        )

    def text(self) -> bytes:
        return generate_latest(self.registry)
