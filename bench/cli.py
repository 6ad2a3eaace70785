"""`python -m bench [--quick] [--out FILE] [--broker tansu|kafka|both] [--entries N] [--warmup N]
[--latency-seconds S] [--contenders A,B] [--skip-e2e]`

Runs every section, writes the results as JSON (default bench/results/latest.json) and prints
a table. It reports and never asserts: a missed target is a line in the table, not a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from importlib import metadata
from pathlib import Path

from bench import core, offline_clean, source_engine
from bench.report import GIB, table, targets
from bench.workload import Synthetic, corpus_replay

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"


@dataclass(frozen=True)
class Config:
    entries: int = 50_000
    # best of 5 and a median of 3: a neighbour's burst rarely spans every repeat, or two of
    # three rounds (the 10x-sessions ratio moved 1.19-1.40 over best-of-3 runs)
    repeats: int = 5
    scaling_sessions: int = 100
    scaling_length: int = 50
    idle_sessions: int = 5_000
    idle_length: int = 3
    rss_sessions: int = 1_000_000
    brokers: tuple[str, ...] = ("tansu",)
    rounds: int = 3
    # entries of the untimed run every contender makes first, on each broker (0: none)
    warmup_entries: int = 10_000
    recovery_sessions: int = 1_000_000
    quix: str = "install"  # install (bench/.venv-quix on demand) | if-present | skip
    # e2e contenders to run, by name (empty: every one available)
    contenders: tuple[str, ...] = ()
    e2e: bool = True
    profile: bool = True
    profile_entries: int = 20_000
    # seconds of steady load per source in the source latency section (0: skipped)
    latency_seconds: float = 60.0
    # seconds of steady load per processing guarantee in the guarantees section (Kafka only)
    guarantee_seconds: float = 20.0
    quick: bool = False
    # sections to run (SECTIONS); empty: every one
    sections: tuple[str, ...] = ()

    def wants(self, section: str) -> bool:
        return not self.sections or section in self.sections


# what --sections may name: the in-process ones, then those run on each broker
SECTIONS = ("core", "e2e", "guarantees", "workers", "recovery", "latency", "profile")


QUICK = Config(entries=5_000, repeats=2, scaling_sessions=50, scaling_length=20,
               idle_sessions=1_000, rss_sessions=10_000,
               rounds=1, warmup_entries=1_000, recovery_sessions=10_000, quix="skip", profile=False,
               profile_entries=5_000, latency_seconds=10.0, quick=True,
               # 5k entries take two workers well under a second, the time their rebalance takes
               sections=tuple(name for name in SECTIONS if name != "workers"))


def _versions() -> dict:
    out = {}
    for name in ("faust-streaming", "aiokafka", "orjson", "mode-streaming"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _engine_build() -> str:
    from stream import pure
    from stream.engine import engine

    return "compiled (mypyc)" if pure.is_compiled(engine) else "Python source"


def _git() -> dict:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=False,
                              cwd=Path(__file__).resolve().parents[1])
        return done.stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain",
                                                                      "stream"))}


def _machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"platform": platform.platform(), "cpu": model, "cpus": os.cpu_count(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB,
                                1),
            "python": platform.python_version()}


def _rss_probe(sessions: int, length: int) -> dict:
    cmd = [sys.executable, "-m", "bench.rss", "--sessions", str(sessions), "--length",
           str(length)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parents[1], timeout=900)
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip()[-500:]}
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    # The state only grows, so the resident set after the run less the one before it is the
    # state's; the peak may still be a transient of start-up when the run is small.
    grown = probe["final_rss_bytes"] - probe["baseline_rss_bytes"]
    per_session = grown / probe["sessions"]
    projected = probe["baseline_rss_bytes"] + per_session * 1_000_000
    measured = probe["sessions"] >= 1_000_000
    probe.update({
        "bytes_per_session": per_session,
        "rss_bytes_for_1m_sessions": probe["peak_rss_bytes"] if measured else projected,
        "label": "measured at 1M sessions" if measured else
        f"EXTRAPOLATED from {probe['sessions']:,} sessions (baseline + per-session growth)",
    })
    return probe


def run_core(config: Config, log=print) -> dict:
    results: dict = {}
    timings: dict = {}
    started = time.perf_counter()
    log(f"workload: {config.entries:,} corpus entries, interleaved")
    workload = corpus_replay(config.entries)
    synthetic = Synthetic()
    results["workload"] = {
        "entries": len(workload),
        "sessions": len({sid for sid, _ in workload}),
        "bytes": sum(len(raw) for _, raw in workload),
        "source": "tests/data/corpus replayed, copy c of session X renamed s{c}-X, sessions "
                  "interleaved uniformly at random (seeded), per-session order kept",
    }
    log("parse floor and engine")
    results["parse_floor"], results["engine"] = core.parse_and_engine(workload, config.repeats)
    results["batch_path"] = core.batch_path(workload, config.repeats, results["engine"])
    timings["engine"] = time.perf_counter() - started
    log("clean against read, parse and write")
    results["clean"] = offline_clean.clean_vs_floor(config.repeats)
    timings["clean"] = time.perf_counter() - started - sum(timings.values())
    log("scaling")
    results["scaling"] = core.scaling(config.scaling_sessions, config.scaling_length,
                                      config.repeats, synthetic)
    timings["scaling"] = time.perf_counter() - started - sum(timings.values())
    log("state")
    state = core.state(workload, config.idle_sessions, config.idle_length, synthetic)
    contiguous = corpus_replay(config.entries, interleaved=False)
    synthetic_load = synthetic.workload(max(50, config.entries // 50), 50, prefix="cl")
    concurrent = corpus_replay(config.entries, copies=20)
    state["changelog"] = {
        "corpus_1040_sessions_interleaved": core.changelog(concurrent),
        "corpus_interleaved": core.changelog(workload),
        "corpus_contiguous": core.changelog(contiguous),
        "synthetic_interleaved": core.changelog(synthetic_load),
        "note": "bytes the worker's flushes write to the two changelogs per input entry, "
                "batches of 1000; values as the worker encodes them, keys add the session id",
    }
    log("rss probes (subprocesses)")
    state["rss"] = {"worker_encoding": _rss_probe(config.rss_sessions, config.idle_length)}
    results["state"] = state
    timings["state"] = time.perf_counter() - started - sum(timings.values())
    log("engine from its Python source, and its profile (subprocess)")
    source = source_engine.run(config.entries, config.repeats, config.profile_entries)
    results["engine_source"] = {key: source[key] for key in ("parse_floor", "engine")
                                if key in source} or source
    results["profile"] = {"engine": source.get("profile", source)}
    timings["engine_source"] = time.perf_counter() - started - sum(timings.values())
    results["seconds"] = timings
    return results


def run_brokers(config: Config, results: dict, workdir: Path, log=print) -> None:
    from bench import e2e
    from bench.procs import create, produce
    from stream.brokers import start_broker

    timings = results.setdefault("seconds", {})
    contenders, quix, quix_note, quix_engine_build = _contenders(config)
    workload = corpus_replay(config.entries)
    records = [(sid.encode(), raw) for sid, raw in workload]
    results["e2e"], results["recovery"] = {}, {}
    for kind in config.brokers:
        started = time.perf_counter()
        log(f"broker {kind}: starting")
        try:
            broker = start_broker(kind)
        except Exception as error:  # noqa: BLE001 - one broker failing must not lose the rest
            results["e2e"][kind] = {"error": f"broker did not start: {error}"[:1500]}
            continue
        try:
            input_topic = f"bench-in-{os.getpid()}"
            create(broker.bootstrap, [input_topic])
            import asyncio

            t0 = time.perf_counter()
            asyncio.run(produce(broker.bootstrap, input_topic, records))
            produce_s = time.perf_counter() - t0
            log(f"  produced {len(records):,} entries in {produce_s:.1f}s")
            here = [c for c in contenders if kind == "kafka" or not c.kafka_only]
            # without the e2e section, the worker's run warms Kafka's JVM for the others
            warmup = e2e.warm_up(broker, records[: config.warmup_entries],
                                 contenders=here if config.wants("e2e") else [e2e.WORKER],
                                 workdir=workdir, log=log)
            if config.wants("e2e"):
                section = e2e.run_rounds(broker, input_topic, total=len(records),
                                         contenders=here, rounds=config.rounds,
                                         workdir=workdir, log=log)
                section["produce_entries_per_s"] = len(records) / produce_s
                section["warmup"] = warmup
                section["quix"] = quix_note
                if not quix:
                    section["quix_unavailable"] = quix_note
                section["quix_engine_build"] = quix_engine_build
                results["e2e"][kind] = section
            _after_e2e(config, kind, broker, results, input_topic=input_topic,
                       total=len(records), workdir=workdir, log=log)
        finally:
            broker.stop()
        timings[f"broker_{kind}"] = time.perf_counter() - started


def _contenders(config: Config) -> tuple[list, str | None, str, str | None]:
    """The e2e contenders, the Quix venv's python (None: unavailable, and why), and which
    build of the engine the Quix venv runs."""
    from bench import e2e
    from bench.procs import engine_build, quix_python

    if config.quix == "skip" or not config.wants("e2e"):
        quix, quix_note = None, "skipped (--quick or --no-quix)"
    else:
        quix, quix_note = quix_python(config.quix == "install")
    contenders = [e2e.WORKER, e2e.WORKER_EOS, e2e.RAW, e2e.NAIVE_FAUST]
    build = None
    if quix:
        contenders += [e2e.quix_contender(quix), e2e.quix_engine_contender(quix),
                       e2e.raw_confluent_contender(quix)]
        build = engine_build(quix)
    if config.contenders:
        contenders = [c for c in contenders if c.name in config.contenders]
    return contenders, quix, quix_note, build


def _after_e2e(config: Config, kind: str, broker, results: dict, *, input_topic: str,
               total: int, workdir: Path, log) -> None:
    """The sections after e2e on one broker: the guarantees' latency (Kafka), source latency,
    workers, recovery, profile.

    The latencies go first: run after the two workers and the restart's million sessions on
    the same broker, the source's p99 was more than twice what it was alone
    (docs/performance.md)."""
    from bench import guarantee_latency, scaling_workers
    from bench.profiling import normalize, worker_profile
    from bench.recovery import recovery

    if config.wants("guarantees") and kind == "kafka" and config.guarantee_seconds:
        results["guarantees"] = guarantee_latency.run(broker, config.guarantee_seconds, workdir,
                                                      log)
    if config.wants("latency"):
        _source_latency(config, kind, broker, results, workdir=workdir, log=log)
    if config.wants("workers"):
        results.setdefault("workers", {})[kind] = scaling_workers.run(
            broker, input_topic, total=total, rounds=config.rounds, workdir=workdir, log=log)
    if config.wants("recovery"):
        results["recovery"][kind] = recovery(broker, config.recovery_sessions, workdir, log)
    # the profile's per-entry figures are shares of the e2e worker's unprofiled CPU
    if config.profile and config.wants("profile") and config.wants("e2e") \
            and kind == config.brokers[0]:
        profile = worker_profile(broker, input_topic, total, workdir, log)
        normalize(profile, results["e2e"][kind]["contenders"]["worker"].get(
            "contender_cpu_us_per_entry"))
        results.setdefault("profile", {})["worker"] = profile


def _source_latency(config: Config, kind: str, broker, results: dict, *, workdir: Path,
                    log) -> None:
    """On the first broker only: the figure is the source's, not the broker's."""
    from bench import source_latency

    if config.latency_seconds and kind == config.brokers[0]:
        results["source_latency"] = source_latency.run(broker, config.latency_seconds, workdir,
                                                       log)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[1])
    parser.add_argument("--quick", action="store_true",
                        help="a small version for CI: under 2 minutes, Tansu only")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results JSON file")
    parser.add_argument("--broker", choices=("tansu", "kafka", "both"), default="tansu")
    parser.add_argument("--entries", type=int, help="entries of the workload (engine and e2e)")
    parser.add_argument("--skip-e2e", action="store_true",
                        help="in-process sections only: no broker, worker or peers")
    parser.add_argument("--rounds", type=int, help="interleaved e2e rounds (median reported)")
    parser.add_argument("--warmup", type=int,
                        help="entries of every contender's untimed first run per broker (0: none)")
    parser.add_argument("--rss-sessions", type=int,
                        help="sessions of the RSS probe (1M by default; fewer: extrapolated)")
    parser.add_argument("--recovery-sessions", type=int)
    parser.add_argument("--no-profile", action="store_true", help="skip the worker profile")
    parser.add_argument("--latency-seconds", type=float,
                        help="steady load per source in the source latency section (0: skip)")
    parser.add_argument("--no-quix", action="store_true",
                        help="leave out the peers of the Quix venv (and never create it)")
    parser.add_argument("--contenders", type=lambda text: tuple(text.split(",")),
                        help="e2e contenders to run, comma-separated (worker, worker_eos, "
                             "raw_aiokafka, naive_faust, quix, quix_engine, raw_confluent; "
                             "default all)")
    parser.add_argument("--guarantee-seconds", type=float,
                        help="steady load per processing guarantee in the guarantees section "
                             "(Kafka only; 0: skip)")
    parser.add_argument("--sections", type=lambda text: tuple(text.split(",")),
                        help=f"only these sections, comma-separated, of: {','.join(SECTIONS)}")
    return parser


def config_from(args: argparse.Namespace) -> Config:
    config = QUICK if args.quick else Config()
    changes: dict = {}
    if args.entries:
        changes["entries"] = args.entries
    if args.rounds:
        changes["rounds"] = args.rounds
    if args.warmup is not None:
        changes["warmup_entries"] = args.warmup
    if args.rss_sessions:
        changes["rss_sessions"] = args.rss_sessions
    if args.recovery_sessions:
        changes["recovery_sessions"] = args.recovery_sessions
    changes["brokers"] = ("tansu", "kafka") if args.broker == "both" else (args.broker,)
    if args.skip_e2e:
        changes["e2e"] = False
    if args.no_profile:
        changes["profile"] = False
    if args.latency_seconds is not None:
        changes["latency_seconds"] = args.latency_seconds
    if args.guarantee_seconds is not None:
        changes["guarantee_seconds"] = args.guarantee_seconds
    if args.no_quix:
        changes["quix"] = "skip"
    if args.contenders:
        changes["contenders"] = args.contenders
    if args.sections:
        unknown = set(args.sections) - set(SECTIONS)
        if unknown:
            raise SystemExit(f"--sections: unknown {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(SECTIONS)}")
        changes["sections"] = args.sections
    return replace(config, **changes)


def run(config: Config, out: Path, command: str = "python -m bench", log=None) -> dict:
    """Every section `config` asks for; writes the results to `out` and returns them."""
    started = time.perf_counter()

    def default_log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    log = log or default_log
    results: dict = {"meta": {
        "command": command,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": _machine(),
        "versions": _versions(),
        "engine_build": _engine_build(),
        "git": _git(),
        "config": asdict(config),
    }}
    if config.wants("core"):
        results.update(run_core(config, log))
    if config.e2e:
        workdir = Path(tempfile.mkdtemp(prefix="session-stream-bench-"))
        try:
            run_brokers(config, results, workdir, log)
        finally:
            if os.environ.get("BENCH_KEEP_LOGS"):
                log(f"logs kept in {workdir}")
            else:
                shutil.rmtree(workdir, ignore_errors=True)
    else:
        results["e2e"] = {"skipped": "--skip-e2e"}
        results["recovery"] = {"skipped": "--skip-e2e"}
        results["workers"] = {"skipped": "--skip-e2e"}
        results["source_latency"] = {"skipped": "--skip-e2e"}
        results["guarantees"] = {"skipped": "--skip-e2e"}
    results["targets"] = targets(results)
    results["meta"]["seconds_total"] = time.perf_counter() - started
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return results


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    results = run(config_from(args), args.out, command.strip())
    print(table(results))
    print(f"\nresults: {args.out}  ({results['meta']['seconds_total']:.0f}s)")
    return 0
