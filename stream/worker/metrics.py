"""The worker's counters in Prometheus form, read from the same Tally the JSON endpoint serves."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from stream.accounting import Tally


class TallyCollector(Collector):
    """Turns the tally into metric families at scrape time, so nothing is counted twice."""

    def __init__(self, tally: Tally, table_sizes: Callable[[], tuple[int, int]]) -> None:
        self._tally = tally
        self._table_sizes = table_sizes

    def collect(self) -> Iterator[Metric]:
        tally = self._tally
        records = CounterMetricFamily(
            "session_stream_records", "Input records by outcome", labels=["outcome"]
        )
        records.add_metric(["in"], tally.entries_in)
        records.add_metric(["kept"], tally.kept)
        records.add_metric(["dropped"], tally.dropped)
        records.add_metric(["dead_lettered"], tally.dead_lettered)
        yield records
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
        sessions, memory = self._table_sizes()
        tables = GaugeMetricFamily("session_stream_table_keys", "Table keys", labels=["table"])
        tables.add_metric(["sessions"], sessions)
        tables.add_metric(["memory"], memory)
        yield tables


def registry_for(tally: Tally, table_sizes: Callable[[], tuple[int, int]]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TallyCollector(tally, table_sizes))
    return registry


def prometheus_text(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
