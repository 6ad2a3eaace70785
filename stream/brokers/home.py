"""The broker `session-stream broker` and `session-stream up` run: one of its own, in a folder
of the state folder, on ports chosen once and kept, so that every start finds the data and the
clients find the broker where it was.

Apache Kafka (single-node KRaft, the jars `scripts/assemble-kafka.sh` assembles) keeps its log
in `<folder>/data`, formatted once; its settings are those measured for one node on one machine
(docs/brokers.md): a 1.5 s broker session, so a broker killed with SIGKILL is back in about
5 s instead of waiting 9 s for its own registration to expire, and an fsync before every
acknowledgement, which a single node needs to keep what it acknowledged through a power cut
(with replicas Kafka leaves fsync to the OS). Tansu, the embedded broker, keeps everything in
memory: it is offered for trying things, and says at every start what it loses.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from stream.brokers.kafka import (
    JVM_OPTIONS,
    SERVER_MAIN,
    format_storage,
    java_command,
    kafka_assembled,
    kafka_libs,
    kafka_version,
    write_config,
)
from stream.brokers.local import HOST, BrokerStartError, free_port
from stream.brokers.tansu import tansu_command, tansu_environment

LocalKind = Literal["kafka", "tansu"]
# Kafka's own port, when it is free at the first start: clients configured for a local Kafka
# (and session-stream's default --broker) find it without being told.
PREFERRED_PORT = 9092
DURABLE_PROPERTIES = {
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "500",
    "log.flush.interval.messages": "1",
}
MEMORY_ONLY_WARNING = (
    "the embedded Tansu broker keeps everything in memory: a restart of it (or of the machine) "
    "loses every record, the worker's state and every consumer group's position; the worker "
    "then meets each session mid-way and names it in a session_seen_midway alert. "
    "Durable: `session-stream up` with Java 17+ (Apache Kafka, the default)"
)
_LISTENER = re.compile(r"^listeners=.*?://[^:]+:(\d+)", re.MULTILINE)


@dataclass(frozen=True)
class LocalBroker:
    kind: LocalKind
    folder: Path
    port: int

    @property
    def url(self) -> str:
        return f"kafka://{HOST}:{self.port}"

    @property
    def durable(self) -> bool:
        return self.kind == "kafka"

    def environment(self) -> dict[str, str]:
        return tansu_environment() if self.kind == "tansu" else dict(os.environ)

    def command(self) -> list[str]:
        """The broker's command line; for Kafka, its storage formatted first if it is new."""
        if self.kind == "tansu":
            return tansu_command(self.port)
        config = self.folder / "server.properties"
        try:
            libs = kafka_libs()
        except subprocess.CalledProcessError as error:
            raise BrokerStartError(f"assembling Apache Kafka failed (exit {error.returncode}): "
                                   "it needs Maven, flock and Maven Central") from error
        if not (self.folder / "data" / "meta.properties").exists():
            format_storage(libs, config)
        return [*java_command(libs, self.folder), *JVM_OPTIONS, SERVER_MAIN, str(config)]


def local_broker(kind: LocalKind, folder: Path, port: int | None = None) -> LocalBroker:
    """The broker of `folder` (made on first use: its ports chosen and kept, Kafka's settings
    written); `port` is taken only the first time. BrokerStartError when the ports it keeps
    are taken by something else."""
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "kafka":
        broker = LocalBroker(kind, folder, _kafka_port(folder, port))
    else:
        broker = LocalBroker(kind, folder, _tansu_port(folder, port))
    if _taken(broker.port):
        raise BrokerStartError(f"port {broker.port} of the {kind} broker in {folder} is taken "
                               "by another process (another broker of this state folder?)")
    return broker


def _kafka_port(folder: Path, port: int | None) -> int:
    config = folder / "server.properties"
    if config.exists():
        found = _LISTENER.search(config.read_text())
        if found is None:
            raise BrokerStartError(f"{config} names no listener port")
        return int(found.group(1))
    client = port or _free_or(PREFERRED_PORT)
    # Nothing outside the broker talks to its controller: any free port.
    controller = _free_or(free_port(), taken=client)
    # Kafka's INFO lines run to thousands a start: a service's log keeps its warnings.
    write_config(folder, client, controller, DURABLE_PROPERTIES, log_level="WARN")
    return client


def _tansu_port(folder: Path, port: int | None) -> int:
    kept = folder / "port"
    if kept.exists():
        return int(kept.read_text().strip())
    chosen = port or _free_or(PREFERRED_PORT)
    kept.write_text(f"{chosen}\n")
    return chosen


def _free_or(preferred: int, taken: int | None = None) -> int:
    if preferred != taken and not _taken(preferred):
        return preferred
    while (port := free_port()) == taken:
        pass
    return port


def _taken(port: int) -> bool:
    """Whether something listens there (a port a killed broker's connections still linger on,
    in TIME_WAIT, is free to it: Kafka binds with SO_REUSEADDR too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return True
    return False


def assemble_note() -> str | None:
    """What a first Kafka start does before it starts: said, since it takes a minute."""
    if kafka_assembled():
        return None
    return (f"assembling Apache Kafka {kafka_version()} from Maven Central jars (once per "
            "machine, into ~/.cache/session-stream; needs Maven and about a minute)")
