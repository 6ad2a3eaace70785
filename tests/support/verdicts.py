"""`session-stream verdicts` as a process of its own, for the tests that ask it questions."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from stream.brokers import free_port
from stream.brokers.local import die_with_parent_hook, stop_process
from stream.settings import Settings


@dataclass
class VerdictService:
    settings: Settings
    token_file: Path
    log_path: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> VerdictService:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "stream.cli", "verdicts", "--token-file",
                 str(self.token_file), "--port", str(self.port)],
                env=self.settings.environment(), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, preexec_fn=die_with_parent_hook(),  # noqa: PLW1509
            )
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self.process.poll() is not None:
                raise RuntimeError(f"verdicts exited {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"verdicts not ready after {timeout}s:\n{self.log()}")
            time.sleep(0.2)
        return self

    def stop(self) -> int | None:
        process, self.process = self.process, None
        return None if process is None else stop_process(process)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def get(self, path: str, token: str | None = None) -> tuple[int, dict]:
        token = self.token_file.read_text().strip() if token is None else token
        request = urllib.request.Request(self.url + path,
                                         headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def ready(self) -> bool:
        try:
            status, body = self.get("/v1/health")
        except OSError:
            return False
        return status == 200 and body["ready"]

    def verdicts(self, session: str, through: str, predecessors: tuple[str, ...] = ()) -> dict:
        query = [("session", session), ("through", through),
                 *(("predecessor", p) for p in predecessors)]
        status, body = self.get("/v1/verdicts?" + urllib.parse.urlencode(query))
        assert status == 200, body
        return body
