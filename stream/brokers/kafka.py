"""Apache Kafka: a single-node KRaft broker run from jars assembled out of Maven Central."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from stream.brokers.base import (
    HOST,
    BrokerStartError,
    RunningBroker,
    broker_workdir,
    free_port,
    launch,
)

DEFAULT_KAFKA_VERSION = "4.4.0"
ASSEMBLE_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "assemble-kafka.sh"
SERVER_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
# Kafka's own scripts default to a 1 GiB heap; half of that is plenty for tests and
# leaves room for the workers on a small machine.
JVM_OPTIONS = ("-Xmx512m", "-Djava.awt.headless=true")

_LOG4J2_PROPERTIES = """\
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = console
"""


def start_kafka(port: int | None = None, ready_timeout: float = 120.0) -> RunningBroker:
    """Start a single-node KRaft Apache Kafka on 127.0.0.1 and wait until it answers metadata.

    Assembles the jars first if the cache lacks them (needs Maven and Maven Central).
    """
    port = port or free_port()
    controller_port = _other_free_port(port)
    libs = kafka_libs()
    with broker_workdir("kafka") as workdir:
        config = _write_config(workdir, port, controller_port)
        _format_storage(libs, config)
        cmd = _server_command(libs, config)
        return launch("kafka", cmd, port, workdir, ready_timeout=ready_timeout)


def kafka_version() -> str:
    return os.environ.get("SESSION_STREAM_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)


def kafka_libs(version: str | None = None) -> Path:
    """The folder of Kafka jars for `version`, assembled on first use."""
    version = version or kafka_version()
    libs = _cache_root() / f"kafka-{version}" / "libs"
    if (libs / ".complete").is_file():
        return libs
    env = {**os.environ, "SESSION_STREAM_KAFKA_VERSION": version}
    done = subprocess.run(
        ["bash", str(ASSEMBLE_SCRIPT)],
        env=env,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return Path(done.stdout.strip().splitlines()[-1])


def server_properties(port: int, controller_port: int, log_dir: Path) -> str:
    """A combined broker+controller node whose internal topics fit a single replica."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        # Tests start consumers one at a time; the default 3 s delay only slows them.
        "group.initial.rebalance.delay.ms": "0",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _cache_root() -> Path:
    default = Path.home() / ".cache" / "session-stream"
    return Path(os.environ.get("SESSION_STREAM_CACHE", default))


def _other_free_port(taken: int) -> int:
    # Two bind-to-0 probes in a row may hand out the same port.
    while (port := free_port()) == taken:
        pass
    return port


def _write_config(workdir: Path, port: int, controller_port: int) -> Path:
    (workdir / "log4j2.properties").write_text(_LOG4J2_PROPERTIES)
    config = workdir / "server.properties"
    config.write_text(server_properties(port, controller_port, workdir / "data"))
    return config


def _format_storage(libs: Path, config: Path) -> None:
    """Write the KRaft metadata a fresh log dir needs before the first start."""
    cmd = [
        *_java_command(libs, config.parent),
        STORAGE_TOOL_MAIN, "format",
        "--cluster-id", _new_cluster_id(),
        "--config", str(config),
    ]  # fmt: skip
    done = subprocess.run(
        cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if done.returncode != 0:
        raise BrokerStartError(f"kafka storage format failed:\n{done.stdout}")


def _server_command(libs: Path, config: Path) -> list[str]:
    return [*_java_command(libs, config.parent), *JVM_OPTIONS, SERVER_MAIN, str(config)]


def _java_command(libs: Path, workdir: Path) -> list[str]:
    return [
        _java(),
        f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}",
        "-cp", f"{libs}/*",
    ]  # fmt: skip


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java:
        raise BrokerStartError("no java on PATH and JAVA_HOME unset; Kafka needs Java 17+")
    return java


def _new_cluster_id() -> str:
    """Kafka's Uuid text form: 16 random bytes, URL-safe base64 without padding."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        # Like Kafka's own generator: a leading '-' would parse as a command-line flag.
        if not cluster_id.startswith("-"):
            return cluster_id
