"""An older commit's worker code run on tables this version wrote: what a worker of an earlier
release does with them during a rolling upgrade (docs/upgrading.md).

`source_tree` puts the commit's `stream` package (`git archive`) in a temporary folder, or skips
the test when the commit is not in the clone's history (a shallow clone); `process` runs that
code's batch processor in a subprocess, uncompiled, on this virtualenv (an old commit's
dependencies are these)."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

REPO = Path(__file__).parents[2]

# Run in the old tree: processes the records on stdin against the tables given, and prints its
# outputs' topics and alert kinds, or the error that stopped the batch.
_READER = """
import base64, json, sys
from stream.engine import Engine
from stream.settings import Settings
from stream.worker.processor import BatchProcessor, InRecord
from stream.worker.tables import TableStore
given = json.load(sys.stdin)
tables = [{base64.b64decode(k): base64.b64decode(v) for k, v in t.items()} for t in given["tables"]]
store = TableStore(tables[0], tables[1], "s", "m")
processor = BatchProcessor(Engine(), store, Settings.load(environ={}))
decoded = [(p, o, base64.b64decode(k), base64.b64decode(v)) for p, o, k, v in given["records"]]
try:
    batch = processor.process([InRecord("session-stream", p, o, k, v) for p, o, k, v in decoded],
                              1780000000.0)
except Exception as error:
    print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
else:
    print(json.dumps({"outputs": [[out.topic, json.loads(out.value).get("kind")]
                                  for out in batch.outputs]}))
"""


@dataclass
class Processed:
    outputs: list[list]  # [topic, alert kind or None] per output record
    error: str | None  # what stopped the batch, as "ExceptionName: message"
    log: str

    @property
    def kinds(self) -> list[str | None]:
        return [kind for _, kind in self.outputs]

    def count(self, topic: str) -> int:
        return [out_topic for out_topic, _ in self.outputs].count(topic)


def source_tree(commit: str, what: str, factory: pytest.TempPathFactory) -> Path:
    git = shutil.which("git")
    found = None if git is None else subprocess.run(
        [git, "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True, check=False)
    if found is None or found.returncode != 0:
        pytest.skip(f"commit {commit} ({what}) is not in this clone's history (a shallow "
                    "clone?)")
    tree = factory.mktemp(commit)
    archive = subprocess.run([git, "-C", str(REPO), "archive", commit, "stream"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def process(tree: Path, tables: tuple[dict[bytes, bytes], dict[bytes, bytes]],
            records: list[tuple[int, int, bytes, bytes]]) -> Processed:
    """The old code's batch processor over `records` (partition, offset, key, value), against
    the two tables (sessions, memory) given."""
    def encoded(table: dict[bytes, bytes]) -> dict[str, str]:
        return {base64.b64encode(k).decode(): base64.b64encode(v).decode()
                for k, v in table.items()}

    given = {"tables": [encoded(table) for table in tables],
             "records": [[p, o, base64.b64encode(k).decode(), base64.b64encode(v).decode()]
                         for p, o, k, v in records]}
    done = subprocess.run([sys.executable, "-c", _READER], input=orjson.dumps(given),
                          capture_output=True, cwd=tree, check=True, timeout=120)
    result = orjson.loads(done.stdout)
    return Processed(result.get("outputs", []), result.get("error"), done.stderr.decode())
