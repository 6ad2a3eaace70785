"""`session-stream clean`: files in, cleaned files, alerts and dead letters out, exit codes."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from stream.cli import main
from tests.support.session_files import POINTER, TELEGRAM_MESSAGES, TRACE_LINE

TEXT = "The backup finished at 03:12 and all 41 files were verified."


def line(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def session_lines(session_id: str, *, with_header: bool = True) -> list[bytes]:
    """header, user, reply, exact delivery mirror of the reply, a broken line, a user."""
    values = [
        {"type": "session", "version": 3, "id": session_id, "cwd": "/tmp"},
        {
            "type": "message",
            "id": f"{session_id}-u1",
            "parentId": None,
            "message": {"role": "user", "content": [{"type": "text", "text": "status?"}]},
        },
        {
            "type": "message",
            "id": f"{session_id}-a1",
            "parentId": f"{session_id}-u1",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": TEXT}],
                "provider": "anthropic",
                "model": "claude-opus-4-5",
            },
        },
        {
            "type": "message",
            "id": f"{session_id}-m1",
            "parentId": f"{session_id}-a1",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": TEXT}],
                "provider": "openclaw",
                "model": "delivery-mirror",
            },
        },
    ]
    lines = [line(v) for v in values]
    lines.append(b'{"type":"message", broken')
    lines.append(
        line(
            {
                "type": "message",
                "id": f"{session_id}-u2",
                "parentId": f"{session_id}-a1",
                "message": {"role": "user", "content": "thanks"},
            }
        )
    )
    return lines if with_header else lines[1:]


def expected_clean(lines: list[bytes]) -> list[bytes]:
    """The input without the mirror and the broken line (every other line byte for byte)."""
    return [raw for raw in lines if b"-m1" not in raw and b"broken" not in raw]


def write(path: Path, lines: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"\n".join(lines) + b"\n"
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(raw) for raw in path.read_bytes().splitlines()]


def test_single_file_to_stdout_with_a_summary_on_stderr(tmp_path, capsysbinary):
    lines = session_lines("sess-a")
    path = write(tmp_path / "sess-a.jsonl", lines)
    assert main(["clean", str(path)]) == 0
    captured = capsysbinary.readouterr()
    assert captured.out.splitlines() == expected_clean(lines)
    summary = captured.err.decode()
    assert "entries in 6: kept 4, dropped 1, dead-lettered 1" in summary
    assert "delivery_mirror_duplicate: 1" in summary
    assert "malformed_entry: 1" in summary


def test_out_file_alerts_and_dead_letters(tmp_path, capsysbinary):
    lines = session_lines("sess-b")
    path = write(tmp_path / "in" / "sess-b.jsonl", lines)
    out, alerts, letters = tmp_path / "clean.jsonl", tmp_path / "a.jsonl", tmp_path / "d.jsonl"
    code = main(
        [
            "clean",
            str(path),
            "--out",
            str(out),
            "--alerts",
            str(alerts),
            "--dead-letters",
            str(letters),
        ]
    )
    assert code == 0
    assert capsysbinary.readouterr().out == b""
    assert out.read_bytes().splitlines() == expected_clean(lines)

    found = read_jsonl(alerts)
    assert sorted(a["kind"] for a in found) == ["delivery_mirror_duplicate", "malformed_entry"]
    for alert in found:
        assert set(alert) == {
            "id",
            "kind",
            "severity",
            "session_id",
            "entry_id",
            "related_entry_id",
            "action",
            "message",
            "evidence",
            "source",
        }
        assert alert["session_id"] == "sess-b"
        assert alert["source"]["file"] == str(path)
    mirror = next(a for a in found if a["kind"] == "delivery_mirror_duplicate")
    assert mirror["entry_id"] == "sess-b-m1"
    assert mirror["related_entry_id"] == "sess-b-a1"
    assert mirror["action"] == "dropped"
    assert mirror["source"]["line"] == 4

    (letter,) = read_jsonl(letters)
    assert letter["raw"].encode() == lines[4]
    assert letter["source"] == {"file": str(path), "line": 5}
    assert letter["session_id"] == "sess-b"
    assert letter["reason"]


def test_alert_snippets_are_opt_in_with_the_worker_s_flag_name(tmp_path):
    path = write(tmp_path / "sess-s.jsonl", session_lines("sess-s"))
    plain, with_text = tmp_path / "plain.jsonl", tmp_path / "snippets.jsonl"
    assert main(["clean", str(path), "--out", str(tmp_path / "o1"), "--alerts", str(plain)]) == 0
    assert main(["clean", str(path), "--out", str(tmp_path / "o2"), "--alerts", str(with_text),
                 "--alert-snippet-chars", "10"]) == 0
    (mirror,) = [a for a in read_jsonl(with_text) if a["kind"] == "delivery_mirror_duplicate"]
    assert mirror["evidence"]["snippet"] == TEXT[:10]
    assert all("snippet" not in alert["evidence"] for alert in read_jsonl(plain))


def test_a_configured_heartbeat_prompt_is_given_with_the_worker_s_flag_name(tmp_path):
    """A heartbeat turn known only by its configured prompt: its replayed reply is dropped
    only when the prompt is given."""
    prompt = "Check the inbox. Say NO_REPLY when nothing changed."

    def msg(n: int, role: str, text: str, **fields) -> dict:
        body = {"role": role, "content": [{"type": "text", "text": text}], **fields}
        return {"type": "message", "id": f"m{n}", "parentId": f"m{n - 1}" if n else None,
                "message": body}

    final = {"provider": "openclaw", "model": "delivery-mirror",
             "openclawDeliveryMirror": {"kind": "channel-final", "sourceMessageId": "hb-1"}}
    values = [{"type": "session", "version": 3, "id": "sess-h", "cwd": "/tmp"},
              msg(0, "user", "status?"), msg(1, "assistant", TEXT), msg(2, "user", prompt),
              msg(3, "assistant", "NO_REPLY"), msg(4, "assistant", TEXT, **final)]
    path = write(tmp_path / "sess-h.jsonl", [line(value) for value in values])
    out = {}
    for name, extra in (("default", []), ("configured", ["--heartbeat-prompt", prompt])):
        alerts = tmp_path / f"{name}.alerts.jsonl"
        assert main(["clean", str(path), "--out", str(tmp_path / name), "--alerts", str(alerts),
                     *extra]) == 0
        out[name] = [a["kind"] for a in read_jsonl(alerts) if a["action"] == "dropped"]
    assert out == {"default": [], "configured": ["silent_turn_replay"]}


def test_alert_ids_are_the_same_on_a_second_run(tmp_path):
    path = write(tmp_path / "sess-c.jsonl", session_lines("sess-c"))
    runs = []
    for n in range(2):
        alerts = tmp_path / f"alerts{n}.jsonl"
        assert (
            main(["clean", str(path), "--out", str(tmp_path / "o"), "--alerts", str(alerts)]) == 0
        )
        runs.append([a["id"] for a in read_jsonl(alerts)])
    assert runs[0] == runs[1]
    assert len(set(runs[0])) == 2


def test_directory_to_out_dir_at_relative_paths(tmp_path, capsysbinary):
    root = tmp_path / "agents"
    one = session_lines("sess-1")
    two = session_lines("sess-2", with_header=False)
    write(root / "main" / "sessions" / "sess-1.jsonl", one)
    write(root / "other" / "sess-2.jsonl.reset.2026-03-09T07-41-35.691Z.gz", two)
    write(root / "main" / "sessions" / "sess-1.checkpoint.1111.jsonl", one[:2])
    write(root / "main" / "sessions" / "sess-1.jsonl.lock", [b"x"])
    (root / "main" / "sessions" / "sessions.json").write_text("{}")
    out_dir, alerts = tmp_path / "out", tmp_path / "alerts.jsonl"
    assert main(["clean", str(root), "--out-dir", str(out_dir), "--alerts", str(alerts)]) == 0

    written = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file())
    assert written == [
        "main/sessions/sess-1.jsonl",
        "other/sess-2.jsonl.reset.2026-03-09T07-41-35.691Z",
    ]
    assert (out_dir / "main/sessions/sess-1.jsonl").read_bytes().splitlines() == expected_clean(one)
    other = out_dir / "other/sess-2.jsonl.reset.2026-03-09T07-41-35.691Z"
    assert other.read_bytes().splitlines() == expected_clean(two)
    # no header: the session id is the file name up to .jsonl
    assert {a["session_id"] for a in read_jsonl(alerts)} == {"sess-1", "sess-2"}
    assert (
        "entries in 11: kept 7, dropped 2, dead-lettered 2"
        in capsysbinary.readouterr().err.decode()
    )


def test_openclaw_runtime_traces_beside_the_transcripts_are_left_out(tmp_path, capsysbinary):
    sessions = tmp_path / "agents" / "main" / "sessions"
    one = session_lines("sess-1")
    write(sessions / "sess-1.jsonl", one)
    # A session whose id ends in ".trajectory" has a transcript named like a trace.
    plan = [line.replace(b"sess-p", b"plan.trajectory") for line in session_lines("sess-p")]
    write(sessions / "plan.trajectory.jsonl", plan)
    for session in ("sess-1", "plan.trajectory"):
        write(sessions / f"{session}.trajectory.jsonl", [TRACE_LINE] * 7)
        (sessions / f"{session}.trajectory-path.json").write_bytes(POINTER)
    (sessions / "sessions.json.telegram-messages.json").write_bytes(TELEGRAM_MESSAGES)
    out_dir, letters = tmp_path / "out", tmp_path / "dead-letters.jsonl"
    assert main(["clean", str(tmp_path), "--out-dir", str(out_dir),
                 "--dead-letters", str(letters)]) == 0

    written = sorted(p.name for p in out_dir.rglob("*") if p.is_file())
    assert written == ["plan.trajectory.jsonl", "sess-1.jsonl"]
    assert (out_dir / "agents/main/sessions/plan.trajectory.jsonl").read_bytes().splitlines() == (
        expected_clean(plan))
    # Only the broken line of each transcript; none from the traces.
    assert [d["session_id"] for d in read_jsonl(letters)] == ["plan.trajectory", "sess-1"]
    assert "entries in 12: kept 8, dropped 2, dead-lettered 2" in (
        capsysbinary.readouterr().err.decode())


def test_several_files_without_out_dir_is_a_usage_error(tmp_path, capsys):
    a = write(tmp_path / "a.jsonl", session_lines("a"))
    b = write(tmp_path / "b.jsonl", session_lines("b"))
    with pytest.raises(SystemExit) as exit_info:
        main(["clean", str(a), str(b)])
    assert exit_info.value.code == 2
    assert "--out-dir" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["clean", str(tmp_path)])  # a directory holding two sessions
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["clean", str(a), "--out", str(tmp_path / "x"), "--out-dir", str(tmp_path / "y")])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["clean"])
    assert exit_info.value.code == 2


def test_unreadable_input_exits_1_and_the_others_are_still_cleaned(tmp_path, capsys):
    good = write(tmp_path / "good.jsonl", session_lines("good"))
    missing = tmp_path / "missing.jsonl"
    out_dir = tmp_path / "out"
    assert main(["clean", str(good), str(missing), "--out-dir", str(out_dir)]) == 1
    err = capsys.readouterr().err
    assert "missing.jsonl" in err
    assert "entries in 6:" in err
    assert (out_dir / "good.jsonl").read_bytes().splitlines() == expected_clean(
        session_lines("good")
    )


def test_single_missing_file_exits_1(tmp_path, capsys):
    assert main(["clean", str(tmp_path / "nope.jsonl")]) == 1
    assert "nope.jsonl" in capsys.readouterr().err


def test_corrupt_gzip_exits_1(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(b"this is not gzip data at all")
    assert main(["clean", str(bad), "--out", str(tmp_path / "o.jsonl")]) == 1
    assert "bad.jsonl.gz" in capsys.readouterr().err


def test_truncated_gzip_exits_1(tmp_path):
    data = gzip.compress(b"\n".join(session_lines("t")) + b"\n")
    bad = tmp_path / "t.jsonl.gz"
    bad.write_bytes(data[: len(data) // 2])
    assert main(["clean", str(bad), "--out", str(tmp_path / "o.jsonl")]) == 1


def test_the_command_as_a_subprocess(tmp_path):
    lines = session_lines("sess-p")
    path = write(tmp_path / "sess-p.jsonl", lines)
    done = subprocess.run(
        [sys.executable, "-m", "stream.cli", "clean", str(path)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected_clean(lines)
    assert b"entries in 6: kept 4, dropped 1, dead-lettered 1" in done.stderr
    usage = subprocess.run(
        [sys.executable, "-m", "stream.cli", "clean", str(path), str(path)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert usage.returncode == 2
