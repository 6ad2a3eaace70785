"""What the output topics should hold (the offline clean of the records), and waiting for it."""

from __future__ import annotations

import contextlib
from collections import defaultdict

import orjson

from stream.commands.clean import clean_session
from stream.engine import Engine
from tests.support.harness import (
    consume_all,
    run,
    wait_until,
)


def offline_results(
    records: list[tuple[bytes, bytes]],
) -> tuple[dict[str, list[bytes]], list[dict]]:
    """What `session-stream clean` gives for the same lines: kept lines per session, alerts."""
    by_session: dict[str, list[bytes]] = defaultdict(list)
    for key, raw in records:
        by_session[key.decode()].append(raw)
    kept: dict[str, list[bytes]] = defaultdict(list)
    alerts: list[dict] = []
    engine = Engine()
    for session_id, lines in by_session.items():
        numbered = list(enumerate(lines, 1))
        for verdict in clean_session(engine, session_id, f"{session_id}.jsonl", numbered):
            if verdict.output is not None:
                kept[session_id].append(verdict.output)
            alerts += [alert.as_json() for alert in verdict.alerts]
    return kept, alerts


def per_session(records) -> dict[str, list[bytes]]:
    grouped: dict[str, list[bytes]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        grouped[record.key.decode()].append(record.value)
    return grouped


def wait_for_outputs(settings, records, timeout: float = 120.0, workers=()):
    """Poll the output topics until they hold what the offline run of `records` gives,
    restarting the `workers` that exit for a restart, as a supervisor would."""
    expected_kept, expected_alerts = offline_results(records)
    wanted_alerts = {without_source(a) for a in expected_alerts}
    latest = None

    def arrived() -> bool:
        nonlocal latest
        for worker in workers:
            worker.restart_if_stalled()
        latest = outputs(settings)
        kept, alerts, _ = latest
        got_alerts = {without_source(orjson.loads(r.value)) for r in alerts}
        return kept == dict(expected_kept) and got_alerts >= wanted_alerts

    with contextlib.suppress(TimeoutError):  # the assertions below say what differs
        wait_until(arrived, timeout, "the outputs of every record")
    kept, alerts, dlq = latest
    assert kept == dict(expected_kept), difference(kept, dict(expected_kept))
    alert_docs = [orjson.loads(record.value) for record in alerts]
    assert {without_source(a) for a in alert_docs} == wanted_alerts
    # A record produced twice after a crash is the same record: same id, same bytes.
    by_id = defaultdict(set)
    for doc in alert_docs:
        by_id[doc["id"]].add(without_source(doc))
    assert all(len(variants) == 1 for variants in by_id.values())
    return kept, alert_docs, dlq


def difference(got: dict[str, list[bytes]], expected: dict[str, list[bytes]]) -> str:
    """Which sessions differ and where, for a failure message that says what went wrong."""
    lines = []
    for session in sorted(got.keys() | expected.keys()):
        mine, theirs = got.get(session, []), expected.get(session, [])
        if mine != theirs:
            index = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False))
                          if a != b),
                         min(len(mine), len(theirs)))
            lines.append(f"{session}: {len(mine)} kept, {len(theirs)} expected, first "
                         f"difference at {index}: {mine[index:index + 1]!r:.300} vs "
                         f"{theirs[index:index + 1]!r:.300}")
    return "\n".join(lines[:20])


def without_source(alert: dict) -> bytes:
    rest = {k: v for k, v in alert.items() if k != "source"}
    return orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)


def outputs(settings) -> tuple[dict[str, list[bytes]], list, list]:
    clean = run(consume_all(settings, settings.clean_topic))
    alerts = run(consume_all(settings, settings.alerts_topic))
    dlq = run(consume_all(settings, settings.dlq_topic))
    kept = {sid: first_occurrences(values) for sid, values in per_session(clean).items()}
    return kept, alerts, dlq


def first_occurrences(values: list[bytes]) -> list[bytes]:
    """At-least-once may repeat a record, but only byte for byte: keep the first of each."""
    return list(dict.fromkeys(values))
