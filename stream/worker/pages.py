"""The worker's web pages: /stats (JSON accounting) and /metrics (Prometheus text).

Faust's table-browsing, router, graph and stats pages are off (stream.worker.app): the tables
hold transcript hashes and ids.
"""

from __future__ import annotations

from stream.engine.tally import Tally
from stream.worker.lag import Lag
from stream.worker.lane import LaneApp
from stream.worker.metrics import WorkerMetrics
from stream.worker.tables import TableStore


def add_pages(app: LaneApp, *, topic: str, tally: Tally, store: TableStore, lag: Lag,
              metrics: WorkerMetrics) -> None:
    guarantee = "exactly_once_v2" if app.delivery.offsets_in_transactions else "at_least_once"

    @app.page("/stats")
    async def stats(web, request):
        sessions, memory = store.size()
        assigned = sorted(tp.partition for tp in app.consumer.assignment() if tp.topic == topic)
        body = {
            **tally.as_json(),
            "table_keys": {"sessions": sessions, "memory": memory},
            "assigned_partitions": assigned,
            "processing_guarantee": guarantee,
            # input partitions given up because their transactions could commit no more
            "partitions_given_up": app.lane_consumer.given_up,
        }
        return web.json(body)

    @app.page("/metrics")
    async def prometheus(web, request):
        # the lag gauge counts from the fetch positions as of this scrape
        await lag.refresh()
        return web.bytes(metrics.text(), content_type="text/plain; version=0.0.4")
