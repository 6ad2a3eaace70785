"""A reboot of the machine, as `session-stream up` lives through it, beside a real OpenClaw
2026.9.6 wired as the README says.

One scenario, driven once: the README's `openclaw` lines applied to the gateway; `up` on a
state folder of its own (the source it picks: the gateway's, by the token in openclaw.json);
a turn; then every process killed with SIGKILL at once, the broker and the gateway included;
`up` started again on the same state folder before the gateway is back (it waits for it); the
gateway started again; a `send` repeating the first reply (a delivery mirror written after the
reboot) and a second turn. On the durable broker (the Kafka suite) the mirror is dropped and
memory holds each reply once; on the memory-only one (the Tansu suite) the worker has lost the
session's state, and the session is named by a `session_seen_midway` alert.

What it fakes: the model (the suite's stand-in, as everywhere in tests/openclaw), and the
search's embeddings: `memory.search.provider` is "none" (full text), since no embedding
provider is reachable offline. `openclaw gateway restart` (a README line) needs the gateway
installed as a service; here the gateway is a process of the test, restarted by the test.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from stream.settings import Settings
from tests.support.openclaw import shapes
from tests.support.openclaw.gateway import Gateway
from tests.support.openclaw.memory import Hit, index, search
from tests.support.openclaw.pipeline import read_per_key
from tests.support.service import MEMORY_ONLY, Up

pytestmark = [
    pytest.mark.openclaw,
    pytest.mark.integration,
    pytest.mark.parametrize("openclaw_release", ["2026.9.6"], indirect=True, scope="module"),
]

README = Path(__file__).resolve().parents[2] / "README.md"
SESSION = "oc-reboot"
REPEAT_KEY = "mirror-after-reboot"
SETTLE_TIMEOUT = 240.0


def readme_openclaw_lines() -> list[list[str]]:
    """The `openclaw` command lines of the README's section on running beside OpenClaw."""
    section = re.split(r"\n##+ ", README.read_text().split("## Running it beside OpenClaw", 1)[1],
                       maxsplit=1)[0]
    lines = [line.split("  #")[0].strip() for block in re.findall(r"```sh\n(.*?)```", section,
                                                                 flags=re.S)
             for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("openclaw ")]


def settled(up: Up) -> dict:
    """Status once the source has sent everything in the store and every group read it all,
    twice in a row with the same counts (the offsets of one look can be a moment old)."""
    previous: list[dict] = []

    def caught_up(report: dict) -> bool:
        source = report.get("source") or {}
        done = (report.get("problems") == [] and source.get("kind") == "gateway"
                and set(source.get("behind", {}).get("rows", {}).values()) == {0}
                and all(group["behind"] == 0 for group in report.get("lag", {}).values()))
        same = done and bool(previous) and previous[-1] == report.get("records")
        previous[:] = [report.get("records")] if done else []
        return same

    return up.wait(caught_up, SETTLE_TIMEOUT, "the source, the worker and the memory writer "
                   "to catch up with OpenClaw")


def turn_after_a_crash(gateway: Gateway, session: str, message: str) -> None:
    """A turn, returned once its reply and the cache-ttl entry after it are stored. Started
    again after a SIGKILL, OpenClaw 2026.9.6 runs the turn without its full bootstrap context
    and writes no `openclaw:bootstrap-context:full` after it, the mark `run_turn` waits for."""
    before = gateway.entry_count(session)
    gateway.cli_json("agent", "--session-id", session, "--message", message, "--json")

    def ended() -> bool:
        new = shapes.parsed(gateway.transcripts().get(session, [])[before:])
        replied = [i for i, entry in enumerate(new) if shapes.is_reply(entry)]
        return bool(replied) and any(shapes.is_custom(entry, shapes.CACHE_TTL)
                                     for entry in new[replied[0]:])

    gateway.wait_for(ended, 240, f"the reply and its cache-ttl entry in session {session}")


@dataclass
class RebootRun:
    gateway: Gateway
    up: Up
    entries: list[dict]  # the session as OpenClaw stored it, at the end
    memory: str  # our memory file of the session
    alerts: list[dict]
    hits: list[Hit]  # `openclaw memory search` for the first reply
    first_reply: str


@pytest.fixture(scope="module")
def reboot_run(openclaw_gateway: Gateway, tmp_path_factory: pytest.TempPathFactory):
    gateway = openclaw_gateway
    work = tmp_path_factory.mktemp("reboot")
    lines = readme_openclaw_lines()
    # what the test does itself: restart its gateway, index, search
    assert lines[-3:] == [["gateway", "restart"], ["memory", "index"],
                          ["memory", "search", "words of a reply"]]
    for args in lines[:-3]:
        gateway.cli(*args)
    gateway.cli("config", "set", "memory.search.provider", '"none"', "--strict-json")
    gateway.restart()
    up = Up(work / "state", gateway.state_dir)
    try:
        up.start()
        gateway.run_turn(SESSION, "What is on the list for today?")
        settled(up)
        first = shapes.replies(shapes.parsed(gateway.transcripts()[SESSION]))[-1]

        # the reboot: nothing stops cleanly
        up.kill_everything()
        gateway.process.kill()
        gateway.stop()
        up.start()  # before the gateway: its source waits for it
        gateway.start()
        gateway.send(shapes.text(first), session_key=gateway.session_key(SESSION),
                     idempotency_key=REPEAT_KEY)
        gateway.wait_for_entry(SESSION, lambda e: shapes.idempotency_key(e) == REPEAT_KEY,
                               "the mirror written after the reboot")
        turn_after_a_crash(gateway, SESSION, "And for tomorrow?")
        settled(up)

        run = up.state.read_run()
        settings = Settings.load(environ={}).replace(**run["settings"])
        alerts = [orjson.loads(value) for values in
                  read_per_key(settings, settings.alerts_topic).values() for value in values]
        memory_file = gateway.home / "workspace" / "memory" / "session-stream" / f"{SESSION}.md"
        index(gateway, gateway.config_path)
        yield RebootRun(gateway, up, shapes.parsed(gateway.transcripts()[SESSION]),
                        memory_file.read_text(), alerts,
                        search(gateway, gateway.config_path, words(shapes.text(first))),
                        shapes.text(first))
    finally:
        up.ensure_stopped()


def test_the_mirror_written_after_the_reboot_is_in_the_store(reboot_run: RebootRun) -> None:
    """What the other tests rely on: OpenClaw wrote the reply again after the reboot."""
    mirrors = [e for e in reboot_run.entries if shapes.idempotency_key(e) == REPEAT_KEY]
    assert len(mirrors) == 1 and shapes.is_mirror(mirrors[0])
    assert shapes.text(mirrors[0]) == reboot_run.first_reply


def test_nothing_is_lost_or_doubled_in_memory(reboot_run: RebootRun) -> None:
    lines = reboot_run.memory.splitlines()
    for entry in reboot_run.entries:
        if shapes.role(entry) in ("user", "assistant") and not shapes.is_mirror(entry):
            said = f"{shapes.role(entry)}: {shapes.text(entry).splitlines()[0]}"
            assert sum(line.startswith(said) for line in lines) == 1, said
    delivered = [line for line in lines if line.startswith("assistant (delivered): ")]
    if MEMORY_ONLY:
        # the worker forgot the reply with everything else: the mirror reaches memory
        assert delivered == [f"assistant (delivered): {reboot_run.first_reply}"]
    else:
        assert delivered == []


def test_the_repeated_reply_is_dropped_or_its_session_named(reboot_run: RebootRun) -> None:
    """On the durable broker the worker kept its state through the reboot: the mirror is
    dropped, and OpenClaw's own search finds the reply once. On the memory-only broker it
    kept nothing: the session is named, once."""
    (mirror,) = [e for e in reboot_run.entries if shapes.idempotency_key(e) == REPEAT_KEY]
    named = [a["session_id"] for a in reboot_run.alerts if a["kind"] == "session_seen_midway"]
    found = [hit.count(words(reboot_run.first_reply)) for hit in reboot_run.hits]
    found = [copies for copies in found if copies]
    if MEMORY_ONLY:
        assert named == [SESSION]
        assert found == [2]  # what the alert warns of: the reply and its mirror, one chunk
    else:
        drops = [a for a in reboot_run.alerts if a["entry_id"] == mirror["id"]]
        assert [(a["kind"], a["action"]) for a in drops] == [
            ("delivery_mirror_duplicate", "dropped")]
        assert named == []
        assert found == [1]


def words(text: str) -> str:
    """What a person would search a reply by: its first words."""
    return " ".join(text.split())[:60]
