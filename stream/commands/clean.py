"""`session-stream clean`: the engine over session files, one session per file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from stream.engine import DictMemory, Engine, FileOrigin, Session, SessionState, Verdict
from stream.engine.tally import Tally
from stream.settings import Settings, add_options
from stream.sources.session_files import (
    READ_ERRORS,
    find_session_files,
    open_lines,
    read_error_reason,
    session_id_of,
)

DESCRIPTION = "Clean OpenClaw session files with the same engine the worker runs."
# The engine's options; `clean` talks to no broker and, unlike the worker, reads no
# SESSION_STREAM_* variable.
ENGINE_OPTIONS = ("max_ids", "alert_snippet_chars", "heartbeat_prompt")


class UsageError(ValueError):
    """The command line asks for something impossible (exit 2)."""


def clean_session(
    engine: Engine, session_id: str, path: str, lines: Iterable[tuple[int, bytes]]
) -> Iterator[Verdict]:
    session = Session(session_id, SessionState(), DictMemory(engine.limits.max_ids))
    for number, raw in lines:
        yield engine.process(session, raw, FileOrigin(path, number))


@dataclass
class CleanJob:
    inputs: list[tuple[Path, Path]]  # (session file, the PATH argument it was found under)
    out: str | None
    out_dir: Path | None
    alerts: Path | None
    dead_letters: Path | None


def plan(paths: list[str], out: str | None, out_dir: str | None, alerts: str | None,
         dead_letters: str | None) -> CleanJob:
    inputs: list[tuple[Path, Path]] = []
    for given in map(Path, paths):
        inputs += [(found, given) for found in find_session_files(given)]
    if len(inputs) > 1 and out_dir is None:
        raise UsageError(f"{len(inputs)} session files: name an --out-dir for their cleaned copies")
    if out_dir is not None and out is not None:
        raise UsageError("--out and --out-dir exclude each other")
    return CleanJob(
        inputs,
        out,
        Path(out_dir) if out_dir else None,
        Path(alerts) if alerts else None,
        Path(dead_letters) if dead_letters else None,
    )


def _output_path(job: CleanJob, found: Path, given: Path) -> Path:
    assert job.out_dir is not None
    relative = found.relative_to(given) if given.is_dir() else Path(found.name)
    if relative.name.endswith(".gz"):
        relative = relative.with_name(relative.name.removesuffix(".gz"))
    return job.out_dir / relative


def run(job: CleanJob, engine: Engine, stdout: BinaryIO, stderr) -> int:
    """Cleans every input; returns 1 if some input could not be read, else 0."""
    tally = Tally()
    unreadable = 0
    with ExitStack() as stack:
        alerts = stack.enter_context(job.alerts.open("wb")) if job.alerts else None
        letters = stack.enter_context(job.dead_letters.open("wb")) if job.dead_letters else None
        for found, given in job.inputs:
            try:
                lines = list(open_lines(found))
            except READ_ERRORS as error:
                unreadable += 1
                print(f"session-stream: cannot read {found}: {read_error_reason(error)}",
                      file=stderr)
                continue
            session_id = session_id_of(found, lines[0][1] if lines else None)
            with ExitStack() as per_file:
                if job.out_dir is not None:
                    target = _output_path(job, found, given)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    out = per_file.enter_context(target.open("wb"))
                elif job.out not in (None, "-"):
                    out = per_file.enter_context(Path(job.out).open("wb"))
                else:
                    out = stdout
                for verdict in clean_session(engine, session_id, str(found), lines):
                    tally.add(verdict)
                    if verdict.output is not None:
                        out.write(verdict.output + b"\n")
                    if verdict.alerts and alerts is not None:
                        alerts.writelines(a.to_bytes() + b"\n" for a in verdict.alerts)
                    if letters is not None and verdict.dead_letter is not None:
                        letters.write(verdict.dead_letter.to_bytes() + b"\n")
                out.flush()
    print(tally.summary(), file=stderr)
    return 1 if unreadable else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="session file or directory")
    parser.add_argument(
        "--out", help="cleaned output of a single input file (default: standard output; - too)"
    )
    parser.add_argument(
        "--out-dir", help="directory for cleaned copies, at each file's path relative to its PATH"
    )
    parser.add_argument("--alerts", help="write alerts here, one JSON object per line")
    parser.add_argument("--dead-letters", help="write dead letters here, one JSON object per line")
    add_options(parser, ENGINE_OPTIONS, connection=False, environment=False)


def main(args, stdout: BinaryIO | None = None, stderr=None) -> int:
    stdout = stdout or sys.stdout.buffer
    stderr = stderr or sys.stderr
    job = plan(args.paths, args.out, args.out_dir, args.alerts, args.dead_letters)
    settings = Settings.load(args, environ={})
    return run(job, Engine(settings.limits()), stdout, stderr)
