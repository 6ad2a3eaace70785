"""`session-stream verdicts` refusing to start: the one line it prints and its exit code."""

from __future__ import annotations

import io
import socket
from pathlib import Path

from stream.cli import build_parser
from stream.commands import verdicts


def run(argv: list[str]) -> tuple[int, str]:
    args = build_parser().parse_args(["verdicts", *argv])
    stderr = io.StringIO()
    return verdicts.main(args, stderr=stderr), stderr.getvalue()


def test_an_empty_token_file_is_refused_before_anything_starts(tmp_path: Path) -> None:
    token = tmp_path / "verdicts.token"
    token.write_text("\n")
    assert run(["--token-file", str(token)]) == (
        2, f"session-stream verdicts: --token-file {token} is empty\n")


def test_a_taken_port_is_named(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, said = run(["--token-file", str(tmp_path / "t"), "--port", str(port),
                          "--broker", "kafka://127.0.0.1:1"])
    assert code == 1
    assert said.startswith(f"session-stream verdicts: cannot listen on 127.0.0.1:{port}: ")
    assert (tmp_path / "t").read_text().strip()  # the token it made stays for the next start
