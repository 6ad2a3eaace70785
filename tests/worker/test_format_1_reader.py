"""What 0.1.0 (the last commit that wrote state format 1) does with a state of format 2, the
mixed window of a one-round upgrade: it has no notion of formats and cannot refuse one. It reads
a format 2 session as unreadable and starts it afresh, so it keeps the redeliveries it should
drop. This is why the upgrade from 0.1 takes two rounds (docs/upgrading.md): while an old worker
may take a partition back, new ones write format 1 (`--upgrade-from 0.1`)."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.support import state_format_fixture as fixture
from tests.worker.test_state_formats import _after_the_first_part, _parts, _process, _store

LAST_FORMAT_1 = "a76737c"
REPO = Path(__file__).parents[2]

# Run under the old commit's code: processes the records on stdin against the tables given.
_OLD_READER = """
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
batch = processor.process([InRecord("session-stream", p, o, k, v) for p, o, k, v in decoded],
                          1780000000.0)
print(json.dumps([[out.topic, json.loads(out.value).get("kind")] for out in batch.outputs]))
"""


@pytest.fixture(scope="module")
def format_1_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    git = shutil.which("git")
    found = None if git is None else subprocess.run(
        [git, "-C", str(REPO), "cat-file", "-e", f"{LAST_FORMAT_1}^{{commit}}"],
        capture_output=True, check=False)
    if found is None or found.returncode != 0:
        pytest.skip(f"commit {LAST_FORMAT_1} (the last that wrote state format 1) is not in "
                    "this clone's history (a shallow clone?)")
    tree = tmp_path_factory.mktemp("format-1")
    archive = subprocess.run([git, "-C", str(REPO), "archive", LAST_FORMAT_1, "stream"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def _old_worker(tree: Path, store, records) -> tuple[list[list], str]:
    def encoded(table: dict[bytes, bytes]) -> dict[str, str]:
        return {base64.b64encode(k).decode(): base64.b64encode(v).decode()
                for k, v in table.items()}

    given = {"tables": [encoded(store._sessions), encoded(store._memory)],
             "records": [[p, o, base64.b64encode(k).decode(), base64.b64encode(v).decode()]
                         for p, o, k, v in records]}
    done = subprocess.run([sys.executable, "-c", _OLD_READER], input=orjson.dumps(given),
                          capture_output=True, cwd=tree, check=True, timeout=120)
    return orjson.loads(done.stdout), done.stderr.decode()


def test_0_1_0_reads_format_2_as_unreadable_and_keeps_what_it_should_drop(
        format_1_tree: Path) -> None:
    first, rest = _parts()
    _, again = _after_the_first_part(first, rest)
    new = _store()
    _process(new, fixture.records(first))  # a new worker wrote the state, in format 2
    written_by_1 = _store(state_format=1)
    _process(written_by_1, fixture.records(first))

    misread, warnings = _old_worker(format_1_tree, new, again)
    read, _ = _old_worker(format_1_tree, written_by_1, again)

    # format 2: sessions started afresh, and each remembered value fails the engine, so
    # every redelivered entry becomes a dead letter instead of a drop
    assert "unreadable state of a session (ExtraData); starting it afresh" in warnings
    assert [topic for topic, _ in misread].count("session-events-dlq") == len(again)
    assert "redelivery" not in [kind for _, kind in misread]
    # format 1, as `--upgrade-from 0.1` writes it: every redelivery dropped as one
    assert "session-events-dlq" not in [topic for topic, _ in read]
    assert [kind for _, kind in read].count("redelivery") > len(again) / 2
    assert "entry_id_conflict" not in [kind for _, kind in read]
