"""A real OpenClaw 2026.9.6 through `session-stream gateway`, the broker, the worker and the
memory writer.

One scenario per module, driven once, with the source running throughout as its own process:
two Anthropic-messages turns, a `send` that repeats the last reply and one with new text
(delivery mirrors), a gateway restart and a turn after it, the source SIGKILLed while a turn
is being written and started again, a turn in a second session that OpenClaw then compacts
(`sessions.compact {maxLines}`: a rewrite in place, the generation rotated) and a turn after
that. Then the worker over the input topic and the memory writer over the clean topic.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from stream.brokers import RunningBroker
from stream.kafka.consumer import TopicMissing
from stream.settings import Settings
from tests.support.harness import wait_until
from tests.support.openclaw import shapes
from tests.support.openclaw.gateway import Gateway
from tests.support.openclaw.pipeline import (
    Offline,
    Outputs,
    clean_rows_offline,
    read_per_key,
    repeated_lines,
    run_worker,
    settings_for,
    without_source,
    write_memory,
)
from tests.support.sources import records_with_headers

pytestmark = [
    pytest.mark.openclaw,
    pytest.mark.integration,
    pytest.mark.parametrize("openclaw_release", ["2026.9.6"], indirect=True, scope="module"),
]

SESSION, COMPACTED = "oc-gw-a", "oc-gw-c"
REPEAT_KEY, NEW_KEY = "gw-mirror-repeat", "gw-mirror-new"
NEW_TEXT = "The report is ready; I sent it to you separately."
ROOT = Path(__file__).resolve().parents[2]


class Source:
    """`session-stream gateway` as a process; started again with the same checkpoint."""

    def __init__(self, gateway: Gateway, settings: Settings, work: Path) -> None:
        self.argv = [
            sys.executable, "-m", "stream.cli", "gateway", "--url", gateway.url,
            "--state-dir", str(gateway.state_dir), "--checkpoint", str(work / "gateway.json"),
            "--broker", settings.broker, "--input-topic", settings.input_topic,
            "--partitions", str(settings.partitions),
        ]
        self.env = {**os.environ, "OPENCLAW_GATEWAY_TOKEN": gateway.token}
        self.log = work / "source.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> Source:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT)
        return self

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)

    def text(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class GatewayRun:
    gateway: Gateway
    rows: dict[str, list[bytes]]  # the store at the end
    compacted_before: list[bytes]  # COMPACTED's rows before sessions.compact
    compacted_after: list[bytes]  # ... right after it
    inputs: dict[str, list[bytes]]
    headers: list[dict[str, bytes]]  # of the input topic's records
    clean_headers: list[dict[str, bytes]]  # of the clean topic's records
    outputs: Outputs
    offline: Offline  # `clean` over the input topic, per session
    memory: dict[str, list[str]]
    log: str
    exit_code: int


def as_first_sent(inputs: dict[str, list[bytes]]) -> dict[str, list[bytes]]:
    """Each session's records without the batch a killed source sent again: killed after the
    broker acknowledged a batch and before its checkpoint moved, it sends that batch once more,
    byte for byte (at-least-once; the worker drops them as redeliveries). The compacted
    session is left as sent: its first rows are sent again by design."""
    return {s: r if s == COMPACTED else list(dict.fromkeys(r)) for s, r in inputs.items()}


def wait_for_inputs(settings: Settings, expected: dict[str, list[bytes]], source: Source) -> None:
    def arrived() -> bool:
        try:
            inputs = as_first_sent(read_per_key(settings, settings.input_topic))
        except TopicMissing:  # the source creates it once it has something to send
            return False
        return all(inputs.get(s, [])[: len(rows)] == rows for s, rows in expected.items())

    try:
        wait_until(arrived, 60, "the store's rows on the input topic")
    except TimeoutError as error:
        source.kill()  # a module fixture that fails leaves no source running
        raise AssertionError(f"{error}\n{source.text()[-3000:]}") from error


@pytest.fixture(scope="module")
def gateway_run(
    openclaw_gateway: Gateway, broker: RunningBroker, tmp_path_factory: pytest.TempPathFactory
) -> GatewayRun:
    gateway = openclaw_gateway
    work = tmp_path_factory.mktemp("gateway-run")
    settings = settings_for(broker, "oc-gw", work)
    source = Source(gateway, settings, work).start()

    gateway.run_turn(SESSION, "What is on the list for today?")
    gateway.run_turn(SESSION, "And for tomorrow?")
    reply = shapes.replies(shapes.parsed(gateway.transcripts()[SESSION]))[-1]
    key = gateway.session_key(SESSION)
    for text, idempotency_key in ((shapes.text(reply), REPEAT_KEY), (NEW_TEXT, NEW_KEY)):
        gateway.send(text, session_key=key, idempotency_key=idempotency_key)
        gateway.wait_for_entry(
            SESSION, lambda e, k=idempotency_key: shapes.idempotency_key(e) == k,
            f"the mirror of the send {idempotency_key}")
    wait_for_inputs(settings, gateway.transcripts(), source)

    gateway.restart()  # the source keeps running: the socket drops, it polls and reconnects
    gateway.run_turn(SESSION, "One more thing, after the restart.")
    wait_for_inputs(settings, gateway.transcripts(), source)

    # SIGKILL while a turn is being written, then a new process from the same checkpoint.
    before = len(gateway.transcripts()[SESSION])
    turn = threading.Thread(target=gateway.run_turn, args=(SESSION, "And a last question."))
    turn.start()
    wait_until(lambda: len(gateway.transcripts()[SESSION]) > before, 60, "the turn's first row")
    source.kill()
    source.start()
    turn.join()
    wait_for_inputs(settings, gateway.transcripts(), source)

    gateway.run_turn(COMPACTED, "Summarise the week, please.")
    gateway.run_turn(COMPACTED, "And the month?")
    wait_for_inputs(settings, gateway.transcripts(), source)
    compacted_before = gateway.transcripts()[COMPACTED]
    answer = gateway.cli_json(
        "gateway", "call", "sessions.compact", "--params",
        json.dumps({"key": gateway.session_key(COMPACTED), "maxLines": 4}),
        "--json", "--url", gateway.url, "--token", gateway.token)
    assert answer["compacted"] is True, answer
    compacted_after = gateway.transcripts()[COMPACTED]
    gateway.run_turn(COMPACTED, "And the year?")
    rows = gateway.transcripts()
    expected = {**rows, COMPACTED: compacted_before + rows[COMPACTED]}
    wait_for_inputs(settings, expected, source)
    exit_code = source.stop()

    inputs = read_per_key(settings, settings.input_topic)
    outputs = run_worker(settings, work / "worker.log", sum(map(len, inputs.values())))
    return GatewayRun(
        gateway, rows, compacted_before, compacted_after, inputs,
        [h for _, _, h in records_with_headers(broker, settings.input_topic)],
        [h for _, _, h in records_with_headers(broker, settings.clean_topic)],
        outputs, clean_rows_offline(inputs, work), write_memory(settings, work / "memory"),
        source.text(), exit_code,
    )


def test_every_store_row_reaches_the_input_topic_in_order_byte_for_byte(
    gateway_run: GatewayRun,
) -> None:
    """Across the gateway restart and the SIGKILL (after which the batch in flight may come
    again, the same bytes); the compacted session aside."""
    rows = {s: r for s, r in gateway_run.rows.items() if s != COMPACTED}
    sent = as_first_sent(gateway_run.inputs)
    assert {s: r for s, r in sent.items() if s != COMPACTED} == rows
    assert gateway_run.exit_code == 0


def test_the_compaction_is_sent_again_from_its_first_changed_row(
    gateway_run: GatewayRun,
) -> None:
    after = gateway_run.compacted_after
    assert len(after) == 4 and after[0] == gateway_run.compacted_before[0]
    assert shapes.parsed(after)[1]["parentId"] is None  # re-parented by OpenClaw
    # Fewer than 64 rows sent before it: no chain mark to resume from, so all of it again.
    assert gateway_run.inputs[COMPACTED] == gateway_run.compacted_before + gateway_run.rows[
        COMPACTED]
    assert "was rewritten in place" in gateway_run.log
    generations = {h.get("openclaw-generation") for h in gateway_run.headers
                   if h.get("openclaw-session-key", b"").endswith(COMPACTED.encode())}
    assert len(generations) == 2


def test_the_clean_topic_is_what_clean_gives_for_the_same_records(
    gateway_run: GatewayRun,
) -> None:
    assert gateway_run.outputs.clean == gateway_run.offline.clean
    assert {without_source(a) for a in gateway_run.outputs.alerts} == {
        without_source(a) for a in gateway_run.offline.alerts}
    assert gateway_run.outputs.dead_letters == []


def test_the_repeating_mirror_is_dropped_and_the_new_one_kept(gateway_run: GatewayRun) -> None:
    entries = shapes.parsed(gateway_run.rows[SESSION])
    repeat = next(e for e in entries if shapes.idempotency_key(e) == REPEAT_KEY)
    new = next(e for e in entries if shapes.idempotency_key(e) == NEW_KEY)
    drops = {(a["kind"], a["entry_id"]) for a in gateway_run.outputs.drops()
             if a["session_id"] == SESSION}
    # what the killed source sent again is dropped as a redelivery, and only that
    sent = [orjson.loads(raw)["id"] for raw in gateway_run.inputs[SESSION]]
    resent = {entry_id for entry_id in sent if sent.count(entry_id) > 1}
    assert {d for d in drops if d[0] != "redelivery"} == {
        ("delivery_mirror_duplicate", repeat["id"])}
    assert {entry_id for kind, entry_id in drops if kind == "redelivery"} <= resent
    kept = {orjson.loads(raw)["id"] for raw in gateway_run.outputs.clean[SESSION]}
    assert new["id"] in kept and repeat["id"] not in kept


def test_the_compacted_rows_sent_again_are_dropped_or_flagged_not_doubled(
    gateway_run: GatewayRun,
) -> None:
    alerts = [a for a in gateway_run.outputs.alerts if a["session_id"] == COMPACTED]
    kinds = {a["kind"] for a in alerts}
    assert "redelivery" in kinds  # the unchanged rows sent again
    assert "entry_id_conflict" in kinds  # the re-parented one: same id, other bytes


def test_the_memory_files_have_no_doubled_line(gateway_run: GatewayRun) -> None:
    assert repeated_lines(gateway_run.memory) == {}
    assert any(NEW_TEXT in line for line in gateway_run.memory[SESSION])


def test_headers_name_the_session_and_the_worker_forwards_them(gateway_run: GatewayRun) -> None:
    keys = {h.get("openclaw-session-key") for h in gateway_run.headers}
    assert gateway_run.gateway.session_key(SESSION).encode() in keys
    assert all(h.get("openclaw-agent-id") == b"main" for h in gateway_run.headers)
    # What downstream of the worker sees: the session's headers, for the memory writers'
    # session facts, and no other.
    assert gateway_run.clean_headers
    assert all(h.get("openclaw-agent-id") == b"main" and set(h) <= {
        "openclaw-agent-id", "openclaw-session-key", "openclaw-previous-session-id",
        "openclaw-window-reason", "openclaw-generation", "openclaw-projection"}
        for h in gateway_run.clean_headers)


def test_the_token_is_in_no_log(gateway_run: GatewayRun) -> None:
    assert gateway_run.gateway.token not in gateway_run.log
