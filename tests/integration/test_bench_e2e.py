"""The bench's end-to-end procedure on the test broker: the warm-up, then a timed round."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from bench import e2e
from bench.procs import new_topic
from bench.workload import corpus_replay
from stream.brokers import RunningBroker

pytestmark = pytest.mark.integration


def test_the_warm_up_runs_each_contender_apart_from_the_timed_input(
    broker: RunningBroker, tmp_path: Path
) -> None:
    records = [(sid.encode(), raw) for sid, raw in corpus_replay(300)]
    input_topic = f"bench-it-{uuid.uuid4().hex[:6]}"
    new_topic(broker.bootstrap, input_topic, records)
    logged: list[str] = []

    warmup = e2e.warm_up(broker, records[:100], contenders=[e2e.RAW], workdir=tmp_path,
                         log=logged.append)
    section = e2e.run_rounds(broker, input_topic, total=len(records), contenders=[e2e.RAW],
                             rounds=1, workdir=tmp_path, log=logged.append)

    # a passthrough: each run puts out exactly the records of its own topic
    assert warmup is not None
    assert warmup["entries"] == 100
    warm = warmup["runs"]["raw_aiokafka"]
    assert warm["output_records"] == 100
    assert "error" not in warm
    assert logged[0] == f"  e2e {broker.kind} warm-up: raw_aiokafka"
    (timed,) = section["contenders"]["raw_aiokafka"]["rounds"]
    assert timed["output_records"] == len(records)
    assert "error" not in timed


def test_no_warm_up_without_records(broker: RunningBroker, tmp_path: Path) -> None:
    assert e2e.warm_up(broker, [], contenders=[e2e.RAW], workdir=tmp_path, log=print) is None
