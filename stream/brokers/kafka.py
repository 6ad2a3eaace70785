"""Apache Kafka: a single-node KRaft broker run from jars assembled out of Maven Central.

Optionally its client listener speaks TLS (`start_kafka(tls=...)`), which Tansu cannot.
"""

from __future__ import annotations

import base64
import functools
import os
import shutil
import ssl
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, overload

from aiokafka.helpers import create_ssl_context

from stream.brokers.local import (
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
rootLogger.level = {level}
rootLogger.appenderRef.console.ref = console
"""


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of a TLS listener.

    `cert` is the broker's certificate (chain), `key` its unencrypted private key (PKCS#8, or
    anything `openssl pkey` converts), `ca` what clients verify the broker against.
    """

    cert: Path
    key: Path
    ca: Path


@dataclass(eq=False)
class TlsKafka(RunningBroker):
    """A Kafka whose client listener at `bootstrap` speaks TLS only (SSL://, no client certs)."""

    tls: TlsFiles = field(kw_only=True)

    @property
    def ca_path(self) -> Path:
        """The CA file a client passes as `ssl_cafile` to trust this broker."""
        return self.tls.ca

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts this broker (and checks its host name)."""
        return create_ssl_context(cafile=str(self.ca_path))

    def client_options(self) -> dict:
        """Over TLS, verifying the certificate against the broker's CA."""
        return {**super().client_options(), "security_protocol": "SSL",
                "ssl_context": self.ssl_context()}


@overload
def start_kafka(
    port: int | None = None, ready_timeout: float = 120.0, *, tls: Literal[False] = False,
    properties: Mapping[str, str] | None = None,
) -> RunningBroker: ...
@overload
def start_kafka(
    port: int | None = None, ready_timeout: float = 120.0, *, tls: TlsFiles | Literal[True],
    properties: Mapping[str, str] | None = None,
) -> TlsKafka: ...
def start_kafka(
    port: int | None = None, ready_timeout: float = 120.0, *, tls: TlsFiles | bool = False,
    properties: Mapping[str, str] | None = None,
) -> RunningBroker:
    """Start a single-node KRaft Apache Kafka on 127.0.0.1 and wait until it answers metadata.

    With `tls` the client listener is SSL:// instead of PLAINTEXT:// (the controller listener
    stays plaintext): `True` makes a self-signed certificate for 127.0.0.1 in the broker's
    workdir (needs the `openssl` CLI), a TlsFiles uses the given files. The result is then a
    TlsKafka, whose `ca_path` clients trust; readiness is checked over TLS. `properties` are
    server properties that replace the test broker's own (Kafka's defaults, for instance).
    Assembles the jars first if the cache lacks them (needs Maven and Maven Central).
    """
    port = port or free_port()
    controller_port = _other_free_port(port)
    libs = kafka_libs()
    with broker_workdir("kafka") as workdir:
        files = None
        if tls is True:
            files = self_signed_tls(workdir / "tls")
        elif isinstance(tls, TlsFiles):
            files = tls
        tls_settings = _tls_properties(workdir / "tls", files) if files else {}
        config = write_config(workdir, port, controller_port,
                               {**tls_settings, **(properties or {})})
        format_storage(libs, config)
        cmd = _server_command(libs, config)
        make = RunningBroker if files is None else functools.partial(TlsKafka, tls=files)
        return launch("kafka", cmd, port, workdir, ready_timeout=ready_timeout, make=make)


def self_signed_tls(directory: Path, days: int = 2) -> TlsFiles:
    """A fresh self-signed certificate for 127.0.0.1 and localhost; it is its own CA."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "cert.pem", directory / "key.pem"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes",
        "-keyout", str(key), "-out", str(cert), "-days", str(days),
        "-subj", f"/CN={HOST}", "-addext", f"subjectAltName=IP:{HOST},DNS:localhost",
    )  # fmt: skip
    return TlsFiles(cert=cert, key=key, ca=cert)


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


def server_properties(
    port: int,
    controller_port: int,
    log_dir: Path,
    extra: Mapping[str, str] | None = None,
) -> str:
    """A combined broker+controller node whose internal topics fit a single replica.

    `extra` properties replace these; with ssl.* properties among them the client listener is
    SSL instead of PLAINTEXT.
    """
    extra = extra or {}
    listener = "SSL" if any(key.startswith("ssl.") for key in extra) else "PLAINTEXT"
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"{listener}://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"{listener}://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": listener,
        "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        # Tests start consumers one at a time; the default 3 s delay only slows them.
        "group.initial.rebalance.delay.ms": "0",
        **extra,
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _cache_root() -> Path:
    default = Path.home() / ".cache" / "session-stream"
    return Path(os.environ.get("SESSION_STREAM_CACHE", default))


def kafka_assembled(version: str | None = None) -> bool:
    """Whether the jars of `version` are there, or `kafka_libs` would assemble them first."""
    return (_cache_root() / f"kafka-{version or kafka_version()}" / "libs" / ".complete").is_file()


def _other_free_port(taken: int) -> int:
    # Two bind-to-0 probes in a row may hand out the same port.
    while (port := free_port()) == taken:
        pass
    return port


def write_config(
    workdir: Path,
    port: int,
    controller_port: int,
    extra: Mapping[str, str],
    log_level: str = "INFO",
) -> Path:
    (workdir / "log4j2.properties").write_text(_LOG4J2_PROPERTIES.format(level=log_level))
    config = workdir / "server.properties"
    config.write_text(server_properties(port, controller_port, workdir / "data", extra))
    return config


def _tls_properties(directory: Path, files: TlsFiles) -> dict[str, str]:
    """ssl.* properties of the SSL listener, with a PEM keystore written into `directory`.

    Kafka's PEM keystore is one file holding the private key in PKCS#8 form followed by the
    certificate chain. The broker trusts `ca` too, for its own inter-broker connections.
    """
    directory.mkdir(parents=True, exist_ok=True)
    keystore = directory / "keystore.pem"
    keystore.touch(mode=0o600)
    keystore.write_text(_pkcs8_key(files.key) + files.cert.read_text())
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca),
        "ssl.client.auth": "none",
    }


def _pkcs8_key(key: Path) -> str:
    text = key.read_text()
    if "-----BEGIN PRIVATE KEY-----" in text:
        return text
    if "ENCRYPTED" in text:
        raise BrokerStartError(f"{key}: an encrypted private key is not supported")
    return _openssl("pkey", "-in", str(key))  # PKCS#1/SEC1 -> PKCS#8


def _openssl(*args: str) -> str:
    openssl = shutil.which("openssl")
    if not openssl:
        raise BrokerStartError("no openssl on PATH; it makes the TLS certificate")
    done = subprocess.run([openssl, *args], check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise BrokerStartError(f"openssl {args[0]} failed:\n{done.stderr}")
    return done.stdout


def format_storage(libs: Path, config: Path) -> None:
    """Write the KRaft metadata a fresh log dir needs before the first start."""
    cmd = [
        *java_command(libs, config.parent),
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
    return [*java_command(libs, config.parent), *JVM_OPTIONS, SERVER_MAIN, str(config)]


def java_command(libs: Path, workdir: Path) -> list[str]:
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
