"""Local broker processes for `dev`, the tests and the benchmark: start, wait ready, stop.

Nothing in the production path imports this: the worker and the sources only talk to a broker
through `stream.kafka`.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Self

from stream.kafka.admin import BrokerUnreachable, wait_for_broker
from stream.kafka.retry import Backoff

BrokerKind = Literal["tansu", "kafka"]
HOST = "127.0.0.1"
_PR_SET_PDEATHSIG = 1
# How often a launcher asks a starting broker whether it is ready.
READY_POLL_S = 0.2


def log_tail(path: Path, lines: int) -> str:
    """The last `lines` lines of a process's log file ("" when there is none yet)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def stop_process(process: subprocess.Popen, sig: signal.Signals = signal.SIGTERM,
                 timeout: float = 25.0) -> int:
    """Send `sig`, SIGKILL after `timeout` seconds; the exit code."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


class BrokerStartError(RuntimeError):
    """The broker process exited or never answered metadata requests."""


@dataclass(eq=False)
class RunningBroker:
    """A broker process on loopback that owns a temporary working directory.

    `kill()` and `restart()` take the broker away and bring it back on the same port and the
    same files, for the tests of what clients do meanwhile. Apache Kafka keeps its topics,
    offsets and groups across them; Tansu keeps everything in memory and loses it all.
    """

    kind: BrokerKind
    port: int
    process: subprocess.Popen[bytes]
    workdir: Path
    log_path: Path
    # how the process was started, so restart() can start it again
    command: list[str] = field(default_factory=list, kw_only=True, repr=False)
    env: Mapping[str, str] | None = field(default=None, kw_only=True, repr=False)
    _stopped: bool = field(default=False, init=False, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    def client_options(self) -> dict:
        """aiokafka client arguments that reach this broker."""
        return {"bootstrap_servers": self.bootstrap}

    def wait_ready(self, timeout: float) -> None:
        """Until the broker answers a metadata request listing a broker; BrokerStartError
        when its process exits or `timeout` passes."""
        def worth_asking() -> bool:
            if self.process.poll() is not None:
                raise BrokerStartError(
                    f"broker process exited with code {self.process.returncode}")
            # a request to a closed port would make aiokafka log a connection error
            return port_is_open(self.port)

        try:
            wait_for_broker(self.client_options(), timeout, backoff=Backoff(READY_POLL_S,
                            READY_POLL_S), worth_asking=worth_asking, quiet=True)
        except BrokerUnreachable as error:
            raise BrokerStartError(str(error)) from None

    def stop(self, timeout: float = 15.0) -> None:
        """Terminate the broker (SIGKILL after `timeout` seconds) and delete its files."""
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        _signal_group(self.process, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the broker, as a crash or an OOM kill would, and keep its files."""
        _signal_group(self.process, signal.SIGKILL)
        self.process.wait()

    def restart(self, ready_timeout: float = 120.0) -> None:
        """Start the broker again, on the same port, data and configuration, once it is
        down (after kill()); returns when it answers metadata again."""
        if self._stopped:
            raise BrokerStartError("the broker was stopped and its files deleted")
        if self.process.poll() is None:
            raise BrokerStartError("the broker is still running; kill() it first")
        with self.log_path.open("ab") as log_file:
            log_file.write(b"\n--- restarted ---\n")
            self.process = _spawn(self.command, self.workdir, log_file, self.env)
        try:
            self.wait_ready(ready_timeout)
        except BrokerStartError as exc:
            raise BrokerStartError(
                f"{self.kind} restart: {exc}\n--- broker.log tail ---\n{self.log_tail()}"
            ) from exc

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (the usual bind-to-0 race applies)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def port_is_open(port: int, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def broker_workdir(kind: BrokerKind) -> Iterator[Path]:
    """A fresh temporary directory for one broker, removed if start-up raises.

    On success it is kept: the RunningBroker owns it and removes it on stop().
    """
    workdir = Path(tempfile.mkdtemp(prefix=f"session-stream-{kind}-"))
    try:
        yield workdir
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise


def launch(
    kind: BrokerKind,
    cmd: list[str],
    port: int,
    workdir: Path,
    *,
    ready_timeout: float,
    env: Mapping[str, str] | None = None,
    make: Callable[..., RunningBroker] = RunningBroker,
) -> RunningBroker:
    """Start `cmd` with output in workdir/broker.log and wait until it serves metadata;
    `make` builds the RunningBroker (or a subclass, which says how to reach it).

    If the broker does not become ready it is stopped before the error propagates.
    """
    log_path = workdir / "broker.log"
    with log_path.open("wb") as log_file:
        process = _spawn(cmd, workdir, log_file, env)
    broker = make(kind, port, process, workdir, log_path, command=cmd, env=env)
    atexit.register(broker.stop)
    try:
        broker.wait_ready(ready_timeout)
    except BaseException as exc:
        tail = broker.log_tail()
        broker.stop(timeout=5.0)
        if isinstance(exc, BrokerStartError):
            raise BrokerStartError(f"{kind}: {exc}\n--- broker.log tail ---\n{tail}") from exc
        raise
    return broker


def _spawn(cmd: list[str], workdir: Path, log_file, env: Mapping[str, str] | None,
           ) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        env=env,
        # Own process group, so a Ctrl-C aimed at the caller's terminal does not
        # hit the broker mid-test, and stop() can signal every process of it.
        start_new_session=True,
        preexec_fn=die_with_parent_hook(),  # noqa: PLW1509 - see the hook
    )


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def die_with_parent_hook() -> Callable[[], None] | None:
    """A pre-exec hook asking Linux to SIGKILL the broker when this process dies.

    atexit does not run when the test process is SIGKILLed; this covers that case.
    The hook is safe despite preexec_fn's warning about threads: it imports nothing
    and takes no lock another thread could hold, it only calls a C function that was
    resolved before the fork.
    Linux ties the signal to the spawning *thread*, so it is only armed from the main
    thread: a broker started from a worker thread would die when that thread ends.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return hook
