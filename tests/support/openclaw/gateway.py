"""A real OpenClaw gateway for the tests: its own HOME and state folder, loopback ports, the
model and Telegram stand-ins, and the commands that drive it (`openclaw agent`, `openclaw
gateway call send`, a Telegram DM).

    gateway = Gateway(locate("2026.9.6"), RELEASES["2026.9.6"], tmp, model, telegram).start()
    gateway.run_turn("s-1", "hello")          # one turn through the gateway
    gateway.send("new text", session_key=gateway.session_key("s-1"))   # a delivery mirror
    gateway.telegram_dm("hi")                 # the bot answers in agent:main:main
    gateway.transcripts()                     # {session id: [raw entry, ...]} as stored
    gateway.stop()

What is known of each release (where it stores transcripts, which entries end a turn) is in
RELEASES; tests/data/openclaw-live/NOTES.md has what was measured.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from stream.brokers import free_port
from stream.brokers.local import die_with_parent_hook
from tests.support.openclaw.install import Installation
from tests.support.openclaw.model import ModelStandIn
from tests.support.openclaw.telegram import BOT_TOKEN, TelegramStandIn
from tests.support.processes import descendants, start_time

AGENT = "main"
MAIN_SESSION_KEY = f"agent:{AGENT}:main"  # where a Telegram DM goes
BOOTSTRAP_CONTEXT = "openclaw:bootstrap-context:full"  # the custom entry that ends a turn
MODEL_PROVIDER, MODEL_ID = "standin", "stand-in-claude"
COMPLETIONS_PROVIDER, COMPLETIONS_MODEL_ID = "standin-oai", "stand-in-gpt"
READY = re.compile(r"\[gateway\]\s+ready\b")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
START_TIMEOUT = 150.0  # a new state folder gets a migration pass first: 12-31 s measured
STOP_GRACE = 30.0  # it ignores a second SIGTERM, and waits for a turn in flight: then SIGKILL
COMMAND_TIMEOUT = 240.0
# The empty lock files 2026.8+ writes whatever HOME is: <kind>.<sha256(db path)[:8]>.lock.sqlite
LOCK_FOLDER = Path("/tmp") / f"openclaw-state-locks-{os.getuid()}"


class GatewayError(RuntimeError):
    """The gateway did not start, or a command against it failed."""


@dataclass(frozen=True)
class Release:
    """What the tests rely on about one OpenClaw release."""

    version: str
    storage: Literal["sqlite", "jsonl"]
    # models.catalogRefresh exists (2026.9+) and must be off: the public catalogue is not
    # reachable from here. Older releases refuse the unknown key.
    has_catalog_refresh: bool
    # 2026.5.12's defects: an api:"cli" copy after every normal turn, and the Telegram bot
    # mirroring each channel reply as a delivery-mirror row with the same text.
    writes_cli_copies: bool
    mirrors_channel_replies: bool


RELEASES = {
    "2026.9.6": Release("2026.9.6", "sqlite", has_catalog_refresh=True,
                        writes_cli_copies=False, mirrors_channel_replies=False),
    "2026.5.12": Release("2026.5.12", "jsonl", has_catalog_refresh=False,
                         writes_cli_copies=True, mirrors_channel_replies=True),
}


def _model(model_id: str, name: str, reasoning: bool, context: int, tokens: int) -> dict:
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    return {"id": model_id, "name": name, "reasoning": reasoning, "input": ["text"],
            "cost": zero, "contextWindow": context, "maxTokens": tokens}


def gateway_config(release: Release, home: Path, *, port: int, token: str, model_url: str,
                   telegram_url: str, telegram_user: int) -> dict[str, Any]:
    """The openclaw.json of one test gateway (tests/data/openclaw-live/openclaw.example.json is
    the config this was measured with)."""
    config: dict[str, Any] = {
        "gateway": {"mode": "local", "port": port, "bind": "loopback",
                    "auth": {"mode": "token", "token": token}, "tailscale": {"mode": "off"}},
        "agents": {"defaults": {
            "model": {"primary": f"{MODEL_PROVIDER}/{MODEL_ID}"},
            "workspace": str(home / "workspace"),
            # With an anthropic-messages model this writes openclaw.cache-ttl after each turn.
            "contextPruning": {"mode": "cache-ttl"},
            # No turns of its own: 2026.5.12 ran a heartbeat turn in agent:main:main soon
            # after start, between the tests' turns.
            "heartbeat": {"every": "0m"},
        }},
        "models": {"mode": "merge", "providers": {
            MODEL_PROVIDER: {"baseUrl": model_url, "apiKey": "sk-ant-local",
                             "api": "anthropic-messages",
                             "models": [_model(MODEL_ID, "Stand-in Claude", True, 200000, 8192)]},
            COMPLETIONS_PROVIDER: {"baseUrl": f"{model_url}/v1", "apiKey": "sk-local",
                                   "api": "openai-completions",
                                   "models": [_model(COMPLETIONS_MODEL_ID, "Stand-in GPT", False,
                                                     128000, 4096)]},
        }},
        # The bundled session-memory hook, as after onboarding: on a reset it writes the
        # session's last messages to <workspace>/memory/ (what the memory test compares with).
        "hooks": {"internal": {"enabled": True,
                               "entries": {"session-memory": {"enabled": True}}}},
        "update": {"checkOnStart": False},
        "logging": {"file": str(home / "logs" / "openclaw.log")},
        "channels": {"telegram": {
            "enabled": True, "botToken": BOT_TOKEN, "apiRoot": telegram_url,
            "dmPolicy": "allowlist", "allowFrom": [str(telegram_user)],
            "network": {"dangerouslyAllowPrivateNetwork": True},
        }},
    }
    if release.has_catalog_refresh:
        config["models"]["catalogRefresh"] = {"enabled": False}
    return config


class Gateway:
    """One OpenClaw gateway process under `root` (HOME is root/home); not started yet."""

    def __init__(self, install: Installation, release: Release, root: Path,
                 model: ModelStandIn, telegram: TelegramStandIn) -> None:
        if install.version != release.version:
            raise ValueError(f"{install.version} installed, {release.version} described")
        self.install = install
        self.release = release
        self.model = model
        self.telegram = telegram
        self.home = root / "home"
        self.state_dir = self.home / ".openclaw"
        self.config_path = self.state_dir / "openclaw.json"
        self.log_path = root / "gateway.log"  # its stdout and stderr, every start appended
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.process: subprocess.Popen[bytes] | None = None
        self._log_start = 0

    # --- where things are ----------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def agent_dir(self) -> Path:
        return self.state_dir / "agents" / AGENT

    @property
    def store_path(self) -> Path:
        """The agent's SQLite store (2026.8+): table transcript_events."""
        return self.agent_dir / "agent" / "openclaw-agent.sqlite"

    @property
    def sessions_dir(self) -> Path:
        """The agent's JSONL sessions folder (up to 2026.7)."""
        return self.agent_dir / "sessions"

    @staticmethod
    def session_key(session_id: str) -> str:
        """The key `openclaw agent --session-id` runs a session under."""
        return f"agent:{AGENT}:explicit:{session_id}"

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPENCLAW_", "SESSION_STREAM_", "NODE_"))}
        env.update(
            HOME=str(self.home),
            PATH=f"{self.install.node_folder}{os.pathsep}{env.get('PATH', '')}",
            OPENCLAW_DISABLE_BONJOUR="1",
            NO_COLOR="1",
            FORCE_COLOR="0",
        )
        return env

    # --- the process ---------------------------------------------------------------------

    def write_config(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.home / "workspace").mkdir(exist_ok=True)
        config = gateway_config(self.release, self.home, port=self.port, token=self.token,
                                model_url=self.model.url, telegram_url=self.telegram.url,
                                telegram_user=self.telegram.user_id)
        self.config_path.write_text(json.dumps(config, indent=2))

    def start(self, timeout: float = START_TIMEOUT) -> Gateway:
        if self.process is not None and self.process.poll() is None:
            raise GatewayError("already running")
        if not self.config_path.exists():
            self.write_config()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.install.command("gateway", "--port", str(self.port), "--bind", "loopback",
                                     "--auth", "token", "--token", self.token),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.home, env=self.environment(),
                # Its own process group: it spawns helpers, and stop() ends them all.
                start_new_session=True,
                preexec_fn=die_with_parent_hook(),  # noqa: PLW1509 - see the hook
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise GatewayError(f"OpenClaw {self.release.version} gateway exited with "
                                   f"{self.process.returncode}:\n{self.log_tail()}")
            if READY.search(self.own_log()):
                return
            time.sleep(0.2)
        raise GatewayError(f"OpenClaw {self.release.version} gateway not ready after "
                           f"{timeout:.0f}s:\n{self.log_tail()}")

    def stop(self, grace: float = STOP_GRACE) -> int | None:
        """SIGTERM, SIGKILL after `grace` seconds (a second SIGTERM is ignored); then what is
        left of the processes it started is killed (its spawn broker runs in a session of its
        own, out of reach of the process group). The exit code, None if never started."""
        process, self.process = self.process, None
        if process is None:
            return None
        children = descendants(process.pid)
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        for pid, started in children.items():
            if start_time(pid) == started:  # still that process, not a reused pid
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self._remove_lock_files()
        return process.returncode

    def restart(self) -> Gateway:
        self.stop()
        return self.start()

    def _remove_lock_files(self) -> None:
        """The lock files named after this state folder's databases; no other run's."""
        if not LOCK_FOLDER.is_dir() or not self.state_dir.is_dir():
            return
        hashes = {sha256(str(db.resolve()).encode()).hexdigest()[:8]
                  for db in self.state_dir.rglob("*.sqlite")}
        for lock in LOCK_FOLDER.glob("*.*.lock.sqlite"):
            if lock.name.split(".")[-3] in hashes:
                lock.unlink(missing_ok=True)

    def own_log(self) -> str:
        """What this start of the gateway wrote so far."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_start)
                return ANSI.sub("", log.read().decode(errors="replace"))
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.own_log().splitlines()[-lines:])

    # --- driving it ----------------------------------------------------------------------

    def cli(self, *args: str, timeout: float = COMMAND_TIMEOUT,
            config: Path | None = None) -> str:
        """Run `openclaw ARGS` against this state folder; its stdout, GatewayError on failure.
        `config` runs it with another openclaw.json (OPENCLAW_CONFIG_PATH) than the gateway's."""
        env = self.environment()
        if config is not None:
            env["OPENCLAW_CONFIG_PATH"] = str(config)
        try:
            done = subprocess.run(self.install.command(*args), check=False, env=env,
                                  cwd=self.home, capture_output=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as error:
            raise GatewayError(f"openclaw {args[0]} took over {timeout:.0f}s\n"
                               f"gateway log:\n{self.log_tail()}") from error
        if done.returncode != 0:
            raise GatewayError(
                f"openclaw {' '.join(args[:3])} exited {done.returncode}\n"
                f"stdout: {done.stdout.decode(errors='replace')[-2000:]}\n"
                f"stderr: {done.stderr.decode(errors='replace')[-2000:]}\n"
                f"gateway log:\n{self.log_tail()}")
        return done.stdout.decode()

    def cli_json(self, *args: str, timeout: float = COMMAND_TIMEOUT,
                 config: Path | None = None) -> dict[str, Any]:
        out = self.cli(*args, timeout=timeout, config=config)
        try:
            return json.loads(out[out.index("{"):])
        except ValueError as error:
            raise GatewayError(f"openclaw {args[0]} printed no JSON: {out[-2000:]!r}") from error

    def run_turn(self, session_id: str, message: str, *, model: str | None = None,
                 timeout: float = COMMAND_TIMEOUT) -> dict[str, Any]:
        """One turn through the gateway (`openclaw agent --session-id ... --json`), returned
        once the transcript holds all of it (the entries written after the reply included).

        `model` ("provider/id") overrides the model for this run, e.g. the
        openai-completions stand-in: `f"{COMPLETIONS_PROVIDER}/{COMPLETIONS_MODEL_ID}"`.
        """
        before = self.entry_count(session_id)
        args = ["agent", "--session-id", session_id, "--message", message, "--json"]
        if model is not None:
            args += ["--model", model]
        result = self.cli_json(*args, timeout=timeout)
        self.wait_for(lambda: self._turn_ended(session_id, before), timeout,
                      f"the end of the turn in session {session_id}")
        return result

    def send(self, message: str, *, session_key: str = MAIN_SESSION_KEY,
             to: str | None = None, idempotency_key: str | None = None) -> dict[str, Any]:
        """`openclaw gateway call send` to the Telegram user, the gateway's answer. OpenClaw
        writes it into the session as a delivery-mirror row (when the session exists; 2026.5.12
        writes none when the text equals the session's latest assistant row). A key used
        before is answered from the gateway's memory: nothing is sent or written again."""
        params = {"channel": "telegram", "to": to or str(self.telegram.user_id),
                  "message": message, "sessionKey": session_key, "agentId": AGENT,
                  "idempotencyKey": idempotency_key or f"send-{secrets.token_hex(6)}"}
        return self.cli_json("gateway", "call", "send", "--params", json.dumps(params),
                             "--json", "--url", self.url, "--token", self.token)

    def wait_for_entry(self, session_id: str, match: Callable[[dict[str, Any]], bool],
                       what: str, timeout: float = 60.0) -> dict[str, Any]:
        """The first entry of the session that `match`es, once there is one."""
        found: list[dict[str, Any]] = []

        def there() -> bool:
            entries = (json.loads(raw) for raw in self.transcripts().get(session_id, []))
            found[:] = [entry for entry in entries if match(entry)][:1]
            return bool(found)

        self.wait_for(there, timeout, what)
        return found[0]

    def telegram_dm(self, text: str, timeout: float = COMMAND_TIMEOUT) -> dict[str, Any]:
        """A DM from the Telegram user; returns what the bot sent back once the transcript of
        agent:main:main holds the whole turn (2026.5.12's mirror of the reply included)."""
        session_id = self.session_id(MAIN_SESSION_KEY)
        before = self.entry_count(session_id) if session_id else 0
        sent = len(self.telegram.sent)
        self.telegram.dm(text)
        self.wait_for(lambda: len(self.telegram.sent) > sent, timeout,
                      "the bot's answer to the DM")

        def ended() -> bool:
            current = self.session_id(MAIN_SESSION_KEY)
            return current is not None and self._turn_ended(current, before if current ==
                                                           session_id else 0, channel=True)

        self.wait_for(ended, timeout, "the end of the DM's turn in agent:main:main")
        return self.telegram.sent[sent]

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if condition():
                return
            if self.process is None or self.process.poll() is not None:
                raise GatewayError(f"the gateway is not running while waiting for {what}:\n"
                                   f"{self.log_tail()}")
            if time.monotonic() > deadline:
                raise GatewayError(f"timed out after {timeout:.0f}s waiting for {what}:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.2)

    def _turn_ended(self, session_id: str, before: int, channel: bool = False) -> bool:
        """The entries after `before` hold a model reply and what this release writes after
        it: openclaw:bootstrap-context:full, then 2026.5.12's cli copy (a CLI turn) or its
        delivery mirror (a channel turn)."""
        new = [json.loads(raw) for raw in self.transcripts().get(session_id, [])[before:]]
        kinds = [_kind(entry) for entry in new]
        if "reply" not in kinds:
            return False
        after = kinds[kinds.index("reply") + 1:]
        if "bootstrap" not in after:
            return False
        if channel and self.release.mirrors_channel_replies:
            return "mirror" in after
        if not channel and self.release.writes_cli_copies:
            return "cli" in after
        return True

    # --- what it wrote -------------------------------------------------------------------

    def session_id(self, session_key: str) -> str | None:
        """The id of the session now under `session_key`, None when there is none yet."""
        if self.release.storage == "jsonl":
            index = self.sessions_dir / "sessions.json"
            try:
                entry = json.loads(index.read_text()).get(session_key)
            except (FileNotFoundError, ValueError):
                return None
            return entry.get("sessionId") if entry else None
        if not self.store_path.exists():
            return None
        with _read_only(self.store_path) as db:
            row = db.execute("SELECT current_session_id FROM session_nodes WHERE session_key = ?",
                             (session_key,)).fetchone()
        return row[0] if row else None

    def transcript_files(self) -> dict[str, Path]:
        """2026.7 and older: session id -> its transcript file, as sessions.json names them."""
        index = self.sessions_dir / "sessions.json"
        if not index.exists():
            return {}
        sessions = json.loads(index.read_text()).values()
        return {s["sessionId"]: Path(s.get("sessionFile") or
                                     self.sessions_dir / f"{s['sessionId']}.jsonl")
                for s in sessions}

    def transcripts(self) -> dict[str, list[bytes]]:
        """Per session id, every transcript entry as OpenClaw stored it, in its order."""
        if self.release.storage == "jsonl":
            found: dict[str, list[bytes]] = {}
            for session_id, path in self.transcript_files().items():
                if path.exists():
                    data = path.read_bytes()
                    complete = data[: data.rfind(b"\n") + 1]
                    found[session_id] = [line for line in complete.split(b"\n") if line.strip()]
            return found
        return {session: [raw for _, raw in rows] for session, rows in self.store_rows().items()}

    def store_rows(self) -> dict[str, list[tuple[int, bytes]]]:
        """2026.8+: per session id, (seq, event) of transcript_events in seq order, the
        zstd-compressed events decompressed."""
        import zstandard

        rows: dict[str, list[tuple[int, bytes]]] = {}
        if not self.store_path.exists():
            return rows
        with _read_only(self.store_path) as db:
            query = ("SELECT session_id, seq, CAST(event_json AS BLOB), event_zstd "
                     "FROM transcript_events ORDER BY session_id, seq")
            for session_id, seq, event_json, event_zstd in db.execute(query):
                event = event_json
                if event is None:
                    event = zstandard.ZstdDecompressor().decompressobj().decompress(event_zstd)
                rows.setdefault(session_id, []).append((seq, bytes(event)))
        return rows

    def entry_count(self, session_id: str | None) -> int:
        return len(self.transcripts().get(session_id, [])) if session_id else 0


def _read_only(path: Path) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True,
                                              timeout=10, isolation_level=None))


def _kind(entry: dict[str, Any]) -> str:
    """What an entry is, as far as the end of a turn goes."""
    if entry.get("type") == "custom" and entry.get("customType") == BOOTSTRAP_CONTEXT:
        return "bootstrap"
    message = entry.get("message") if entry.get("type") == "message" else None
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return "other"
    if message.get("provider") == "openclaw" and message.get("model") == "delivery-mirror":
        return "mirror"
    if message.get("api") == "cli":
        return "cli"
    return "reply"
