"""The benchmark harness runs and reports sane numbers (its in-process sections, on a tiny
workload; no broker). It never judges timing: targets are reported, not asserted."""

from __future__ import annotations

import importlib
import json
import math
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from bench import cli, core
from bench.procs import Child, OutputStats
from bench.profiling import categorize, parse_collapsed, summarize_samples
from bench.report import table, targets
from bench.scaling_workers import _Member, _rates, _Watch
from bench.workload import Synthetic, corpus_replay

TINY = replace(
    cli.QUICK, entries=600, repeats=2, scaling_sessions=4, scaling_length=10,
    idle_sessions=40, rss_sessions=400, profile_entries=200,
    e2e=False,
)


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("bench") / "results.json"
    cli.run(TINY, out, log=lambda message: None)
    return json.loads(out.read_text())


def test_the_results_file_has_every_section(results: dict) -> None:
    for section in ("meta", "workload", "parse_floor", "engine", "batch_path", "clean", "scaling",
                    "state", "e2e", "recovery", "profile", "targets"):
        assert section in results, section
    assert results["e2e"] == {"skipped": "--skip-e2e"}
    assert results["meta"]["config"]["entries"] == 600


def test_throughputs_are_positive_and_the_ratio_follows_from_them(results: dict) -> None:
    parse, engine = results["parse_floor"], results["engine"]
    assert parse["entries"] == engine["entries"] == results["workload"]["entries"] == 600
    for value in (parse["entries_per_s"], parse["mb_per_s"], engine["entries_per_s"],
                  engine["us_per_entry"]):
        assert _positive(value)
    assert engine["ratio_to_parse"] == pytest.approx(
        engine["entries_per_s"] / parse["entries_per_s"])
    assert engine["kept"] + engine["dropped"] + engine["dead_lettered"] == 600


def test_the_batch_path_is_measured_over_the_same_entries_as_the_engine(results: dict) -> None:
    batch, engine = results["batch_path"], results["engine"]
    assert batch["entries"] == engine["entries"] == 600
    assert _positive(batch["us_per_entry"])
    assert batch["us_beyond_engine"] == pytest.approx(
        batch["us_per_entry"] - engine["us_per_entry"])
    assert "worker batch" in table(results)


def test_clean_is_measured_against_reading_parsing_and_writing_the_same_files(
        results: dict) -> None:
    offline = results["clean"]
    assert offline["files"] > 1 and offline["entries"] > 1000
    assert offline["ratio_to_floor"] == pytest.approx(
        offline["floor_seconds"] / offline["clean_seconds"])
    assert any(row["target"].startswith("clean /") for row in results["targets"])


def test_scaling_compares_equal_entry_counts(results: dict) -> None:
    scaling = results["scaling"]
    for name in ("base", "more_sessions", "more_sessions_grouped", "longer_sessions"):
        assert _positive(scaling[name]["us_per_entry"])
    assert scaling["more_sessions"]["sessions"] == 10 * scaling["base"]["sessions"]
    assert scaling["more_sessions_grouped"]["sessions"] == 10 * scaling["base"]["sessions"]
    assert scaling["more_sessions_grouped"]["interleaved"] == scaling["base"]["sessions"]
    assert scaling["longer_sessions"]["entries_per_session"] == 10 * scaling["base"][
        "entries_per_session"]
    for name in ("more_sessions", "more_sessions_grouped", "longer_sessions"):
        assert _positive(scaling[name]["ratio_to_base"])


def test_every_repeat_is_kept_and_the_figure_is_the_best_of_them(results: dict) -> None:
    scaling = results["scaling"]
    sections = [results["parse_floor"], results["engine"], results["batch_path"]] + [
        scaling[name]
        for name in ("base", "more_sessions", "more_sessions_grouped", "longer_sessions")]
    for section in sections:
        runs = section["us_per_entry_runs"]
        assert len(runs) == TINY.repeats and all(_positive(run) for run in runs)
    for section in sections[1:]:
        assert section["us_per_entry"] == pytest.approx(min(section["us_per_entry_runs"]))
    parse = results["parse_floor"]
    assert 1e6 / parse["entries_per_s"] == pytest.approx(min(parse["us_per_entry_runs"]))


def test_the_grouped_run_interleaves_only_a_group_of_sessions_at_a_time() -> None:
    workload = Synthetic(seed=3).workload(12, 5)
    grouped = core.in_groups(workload, 4)
    assert sorted(grouped) == sorted(workload)
    for sid in {sid for sid, _ in workload}:
        assert [raw for s, raw in grouped if s == sid] == [raw for s, raw in workload if s == sid]
    # each run of 20 entries (4 sessions x 5) holds exactly its own 4 sessions
    chunks = [grouped[i:i + 20] for i in range(0, 60, 20)]
    sessions = [{sid for sid, _ in chunk} for chunk in chunks]
    assert all(len(group) == 4 for group in sessions)
    assert not sessions[0] & sessions[1] and not sessions[1] & sessions[2]
    # and within a group the stream's interleaving is kept
    assert chunks[0] == [item for item in workload if item[0] in sessions[0]]


def test_state_sizes_are_plausible(results: dict) -> None:
    state = results["state"]
    corpus = state["serialized_bytes_per_session"]["corpus_sessions"]
    assert corpus["count"] == 52
    assert 50 < corpus["mean"] <= corpus["max"] < 10_000
    memory = state["memory_bytes_per_idle_session"]
    assert _positive(memory["engine_objects_small_sessions"])
    assert _positive(memory["worker_tables_small_sessions"])
    for name, log in state["changelog"].items():
        if isinstance(log, dict):
            assert _positive(log["value_bytes_per_entry"]), name
            assert log["key_and_value_bytes_per_entry"] > log["value_bytes_per_entry"]
            assert log["session_writes_per_entry"] <= 1.0
    for name, probe in state["rss"].items():
        assert "error" not in probe, probe
        assert probe["sessions"] == 400, name
        assert _positive(probe["peak_rss_bytes"])
        assert _positive(probe["rss_bytes_for_1m_sessions"])
        assert "EXTRAPOLATED" in probe["label"]


def test_the_engine_profile_names_functions(results: dict) -> None:
    profile = results["profile"]["engine"]
    assert profile["top_self"] and profile["top_inclusive"]
    assert any("stream/engine" in row["function"] for row in profile["top_inclusive"])


def test_targets_are_reported_not_asserted(results: dict) -> None:
    names = [row["target"] for row in results["targets"]]
    assert any("engine" in name for name in names)
    assert any("changelog" in name for name in names)
    for row in results["targets"]:
        assert row["met"] in (True, False, None)
    assert "== targets ==" in table(results)


def test_an_rss_extrapolated_from_fewer_sessions_is_reported_but_not_judged() -> None:
    def rss_row(sessions: int, gib: float) -> dict:
        probe = {"sessions": sessions, "rss_bytes_for_1m_sessions": gib * 1024**3,
                 "label": "some label"}
        rows = targets({"state": {"rss": {"worker_encoding": probe}}})
        return next(row for row in rows if row["target"].startswith("RSS"))

    assert rss_row(10_000, 1.7)["met"] is None
    assert rss_row(10_000, 1.7)["value"] == pytest.approx(1.7)
    assert rss_row(1_000_000, 1.01)["met"] is False
    assert rss_row(1_000_000, 0.99)["met"] is True


def test_the_workload_renames_sessions_and_keeps_their_order() -> None:
    stream = corpus_replay(7_000)
    assert len(stream) == 7_000
    ids = {sid for sid, _ in stream}
    assert any(sid.startswith("s1-") for sid in ids)  # a second copy was needed
    first = {}
    for sid, raw in stream:
        first.setdefault(sid, raw)
    # every session's first replayed line is its header, as in the file
    assert all(orjson.loads(raw)["type"] == "session" for raw in first.values())


def test_synthetic_sessions_are_valid_entries_of_realistic_size() -> None:
    workload = Synthetic(seed=3).workload(20, 30)
    values = [orjson.loads(raw) for _, raw in workload]
    assert len(values) == 600
    roles = {v["message"]["role"] for v in values if v["type"] == "message"}
    assert roles == {"user", "assistant", "toolResult"}
    mean = sum(len(raw) for _, raw in workload) / len(workload)
    assert 300 < mean < 5_000


def test_py_spy_samples_are_summed_by_category() -> None:
    root = "main (stream/cli.py:1)"
    text = "\n".join([
        f"{root};clean (stream/worker/app.py:90);process (stream/engine/engine.py:56) 30",
        f"{root};_run_once (asyncio/base_events.py:1845);select_epoll_poll (select.c.h:841) 50",
        f"{root};send (aiokafka/producer/producer.py:400);0x1 (orjson/orjson.so) 10",
        f"{root};_find_and_load (<frozen importlib._bootstrap>:1) 5",
    ])
    summary = summarize_samples(parse_collapsed(text), entries=100, rate=100)
    assert summary["samples"] == 40
    assert summary["idle_samples_excluded"] == 50
    assert summary["startup_samples_excluded"] == 5
    shares = {row["category"]: row["share"] for row in summary["categories"]}
    assert shares == {"engine": 0.75, "json (orjson, json)": 0.25}
    assert categorize(["x (faust/tables/base.py:1)"]) == "faust tables + changelog"


def test_the_command_line_defaults() -> None:
    args = cli.build_parser().parse_args(["--quick", "--broker", "both", "--skip-e2e"])
    config = cli.config_from(args)
    assert config.quick and not config.e2e
    assert config.brokers == ("tansu", "kafka")
    assert args.out == Path(cli.RESULTS)
    assert config.warmup_entries == cli.QUICK.warmup_entries > 0


def test_the_warm_up_can_be_sized_or_left_out() -> None:
    assert cli.config_from(cli.build_parser().parse_args([])).warmup_entries == 10_000
    assert cli.config_from(cli.build_parser().parse_args(["--warmup", "0"])).warmup_entries == 0


def test_sections_can_be_chosen_and_the_full_run_restarts_with_a_million_sessions() -> None:
    parse = cli.build_parser().parse_args
    full = cli.config_from(parse([]))
    assert full.recovery_sessions == 1_000_000
    assert all(full.wants(name) for name in cli.SECTIONS)
    assert not cli.config_from(parse(["--quick"])).wants("workers")
    chosen = cli.config_from(parse(["--sections", "workers,recovery"]))
    assert chosen.wants("recovery") and not chosen.wants("e2e") and not chosen.wants("core")
    with pytest.raises(SystemExit):
        cli.config_from(parse(["--sections", "workers,nonsense"]))


def test_two_workers_are_reported_against_one_and_not_judged() -> None:
    def run(rate: float, cpu: list[float]) -> dict:
        return {"steady_entries_per_s": rate, "entries_per_s": rate,
                "worker_cpu_us_per_entry": cpu, "workers_cpu_us_per_entry": sum(cpu),
                "broker_cpu_us_per_entry": 20.0, "rounds": []}

    workers = {"workers_1": run(20_000.0, [40.0]),
               "workers_2": {**run(26_000.0, [27.0, 26.0]), "split_bound": 1.57},
               "ratio_2_over_1": 1.3, "ratio_2_over_1_whole_span": 1.1}
    results = {"workers": {"kafka": workers}}
    (row,) = [row for row in targets(results) if "workers" in row["target"]]
    assert row["value"] == 1.3 and row["met"] is None
    assert "27 + 26 us" in row["note"]
    printed = table({**results, "targets": [row]})
    assert "reported     kafka: 2 workers in one group / 1 worker" in printed
    assert "the partitions' split bounds it at 1.57x" in row["note"]
    assert "2 workers / 1 worker 1.30 (whole span 1.10; at most 1.57" in printed


def test_the_steady_rate_starts_after_the_last_assignment() -> None:
    stats = OutputStats()
    for ms in (1_000, 2_000, 3_000, 5_000, 7_000):
        stats.add(ms, "clean")
    members = [_Member(Child("w", [], Path("w.log")), 0, cpu=[(0.0, 0.0), (10.0, 1.0)])]
    # the assignment last changed at 2.5 s, when 400 of the 1,000 entries were in
    moved = _Watch(settled_at=2.5, entries_in_then=400, broker_cpu=[(0.0, 0.0), (10.0, 2.0)])
    result: dict = {}
    _rates(result, stats, moved, members, total=1_000)
    assert result["entries_per_s"] == pytest.approx(1_000 / 6.0)
    assert result["steady_span_s"] == pytest.approx(4.0)  # from the output at 3 s to 7 s
    assert result["steady_entries_per_s"] == pytest.approx(600 / 4.0)
    assert result["worker_cpu_us_per_entry"] == [pytest.approx(1e6 * 0.4 / 600)]
    # nothing taken in before the last change: the whole span, as in the e2e section
    still: dict = {}
    _rates(still, stats, _Watch(settled_at=2.5), members, total=1_000)
    assert still["steady_entries_per_s"] == still["entries_per_s"]


def test_each_source_is_judged_against_its_own_latency_and_idle_targets() -> None:
    latency = {
        "gateway": {"p99_ms": 140.0, "no_event": {"p99_ms": 160.0}, "idle_cpu_share": 0.004},
        "follow_sqlite": {"p99_ms": 240.0, "no_event": {"p99_ms": 200.0},
                          "idle_cpu_share": 0.02},
    }
    rows = {row["target"]: row for row in targets({"source_latency": latency})
            if " source:" in row["target"]}
    met = {name: row["met"] for name, row in rows.items()}

    assert met == {
        "gateway source: p99 from store commit to clean topic at 200 rows/s, ms": True,
        "gateway source: p99 of the rows with no event, ms": False,  # 160 > 150
        "gateway source: CPU on an idle store, % of a core": True,
        "follow_sqlite source: p99 from store commit to clean topic at 200 rows/s, ms": True,
        "follow_sqlite source: p99 of the rows with no event, ms": True,
        "follow_sqlite source: CPU on an idle store, % of a core": False,  # 2 % > 1 %
    }
    assert rows["gateway source: CPU on an idle store, % of a core"]["value"] == 0.4


def test_source_latency_lines_show_the_rows_with_no_event_and_the_idle_cost() -> None:
    run = {"p50_ms": 80.0, "p99_ms": 140.0, "rows": 100, "arrived": 100,
           "no_event": {"p99_ms": 120.0}, "idle_cpu_share": 0.004, "to_input_topic": {}}
    latency = {"rate_rows_per_s": 200.0, "sessions": 50, "seconds": 10.0, "gateway": run,
               "follow_sqlite": run}

    printed = table({"source_latency": latency})

    assert "with no event: p99 120 ms; idle 0.40 % of a core" in printed


def test_contenders_can_be_picked_by_name() -> None:
    assert cli.config_from(cli.build_parser().parse_args([])).contenders == ()
    args = cli.build_parser().parse_args(["--contenders", "worker,raw_confluent"])
    assert cli.config_from(args).contenders == ("worker", "raw_confluent")


def test_the_goal_against_quix_with_this_engine_is_judged_only_on_the_same_work() -> None:
    def goal(clean_records: dict) -> dict:
        e2e = {"ratios": {"worker_over_quix_engine": 1.5},
               "same_work": {"clean_records": clean_records,
                             "equal": len({*clean_records["worker"],
                                           *clean_records["quix_engine"]}) == 1}}
        rows = targets({"e2e": {"tansu": e2e}})
        return next(row for row in rows if "running this engine" in row["target"])

    assert goal({"worker": [10, 10], "quix_engine": [10, 10]})["met"] is True
    unequal = goal({"worker": [10], "quix_engine": [9]})
    assert unequal["met"] is None
    assert "NOT the same work" in unequal["note"]


def test_exactly_once_is_judged_against_at_least_once_with_what_a_batch_waited() -> None:
    def worker(rate: float, delivery: float, wait: float) -> dict:
        return {"entries_per_s": rate, "delivery_ms_per_batch": delivery,
                "commit_wait_ms_per_batch": wait, "rounds": [], "describe": ""}

    e2e = {"contenders": {"worker": worker(20_000.0, 30.0, 4.0),
                          "worker_eos": worker(17_000.0, 45.0, 12.0)},
           "ratios": {"worker_eos_over_worker": 0.85}}
    (row,) = [row for row in targets({"e2e": {"kafka": e2e}}) if "exactly once" in row["target"]]
    assert row["target"] == "kafka: worker exactly once / at least once (entries/s)"
    assert row["met"] is True and row["limit"] == 0.8
    assert "worker_eos: delivery 45.0 ms a batch, the lane waited 12.0 ms" in row["note"]
    # on Tansu no exactly-once worker runs: no row
    tansu = {"contenders": {"worker": worker(20_000.0, 30.0, 4.0)}, "ratios": {}}
    assert not [row for row in targets({"e2e": {"tansu": tansu}})
                if "exactly once" in row["target"]]


def test_the_clean_topic_latency_of_each_guarantee_is_printed() -> None:
    run = {"p50_ms": 60.0, "p99_ms": 140.0, "max_ms": 200.0, "arrived": 900, "entries": 1000,
           "delivery_ms_per_batch": 8.0, "commit_wait_ms_per_batch": 2.0, "batches": 400}
    guarantees = {"rate_entries_per_s": 1000.0, "seconds": 20.0, "at_least_once": run,
                  "exactly_once_v2": {**run, "p99_ms": 180.0}}
    printed = table({"guarantees": guarantees})
    assert "clean topic latency by guarantee: kafka, 1,000 entries/s for 20 s" in printed
    assert "exactly_once_v2  p50 60 ms  p99 180 ms" in printed
    assert "at_least_once    p50 60 ms  p99 140 ms" in printed


def test_the_exactly_once_worker_runs_on_kafka_only() -> None:
    from bench import e2e

    assert e2e.WORKER_EOS.kafka_only and not e2e.WORKER.kafka_only
    assert cli.config_from(cli.build_parser().parse_args([])).guarantee_seconds > 0
    args = cli.build_parser().parse_args(["--guarantee-seconds", "0"])
    assert cli.config_from(args).guarantee_seconds == 0


# Sections import their modules when they run, so a broken import shows only in a full run.
# The peers of the Quix venv run there (the benchmark makes it); __main__ runs the benchmark.
SECTION_MODULES = sorted(
    path.stem for path in (Path(__file__).resolve().parents[1] / "bench").glob("*.py")
    if path.stem not in ("__main__", "quix_peer", "quix_engine_peer", "confluent_peer")
)


@pytest.mark.parametrize("module", SECTION_MODULES)
def test_every_bench_module_imports(module: str) -> None:
    importlib.import_module(f"bench.{module}")
