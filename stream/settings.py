"""One settings object for every Kafka-facing subcommand, from flags and SESSION_STREAM_* variables.

Each option is declared once in OPTIONS; the argparse flags, the environment variables, the
`--help` text and the configuration table of docs/configuration.md are all derived from that list.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

from stream.engine import Limits
from stream.engine.context import DEFAULT_MAX_IDS
from stream.formats import upgrade_from

ENV_PREFIX = "SESSION_STREAM_"


@dataclass(frozen=True)
class Option:
    name: str
    default: object
    help: str
    parse: Callable[[str], object] = str

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return number


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds greater than 0."""
    seconds = float(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return seconds


def _seconds(text: str) -> float:
    """Seconds, or a number with a unit: 30s, 15m, 12h, 7d."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip()
    if text and text[-1] in units:
        return float(text[:-1]) * units[text[-1]]
    return float(text)


_LOG_LEVELS = {"debug": "debug", "info": "info", "warn": "warning", "warning": "warning",
               "error": "error", "critical": "critical"}


# Kafka Streams' names. auto: exactly once where the broker grants a transactional producer at
# start (Apache Kafka), at least once where it does not (Tansu), with a line that says why.
PROCESSING_GUARANTEES = ("auto", "at_least_once", "exactly_once_v2")


def processing_guarantee(text: str) -> str:
    """One of PROCESSING_GUARANTEES, in any case."""
    guarantee = text.strip().lower()
    if guarantee not in PROCESSING_GUARANTEES:
        raise argparse.ArgumentTypeError(
            f"unknown processing guarantee {text!r}; use one of {', '.join(PROCESSING_GUARANTEES)}")
    return guarantee


def log_level(text: str) -> str:
    """A logging level by its usual names, in any case; `warn` is `warning`."""
    level = _LOG_LEVELS.get(text.strip().lower())
    if level is None:
        raise argparse.ArgumentTypeError(
            f"unknown log level {text!r}; use one of debug, info, warning, error, critical")
    return level


OPTIONS: tuple[Option, ...] = (
    Option("broker", "kafka://127.0.0.1:9092", "Kafka broker URL(s), comma-separated"),
    Option("partitions", 4, "partitions of every topic the worker creates", int),
    Option("replication", 1, "replication factor of the topics the worker creates", int),
    Option("app_id", "session-stream", "consumer group and changelog prefix"),
    Option("data_dir", ".session-stream", "Faust data directory"),
    Option("input_topic", "session-events", "topic of raw transcript entries, keyed by session"),
    Option("clean_topic", "session-events-clean", "topic of kept entries"),
    Option("alerts_topic", "session-alerts", "topic of alerts"),
    Option("dlq_topic", "session-events-dlq", "topic of dead letters"),
    Option("max_ids", DEFAULT_MAX_IDS, "recent entry ids and idempotency keys remembered per "
           "session", int),
    Option("session_ttl", 7 * 86400.0, "forget sessions idle this long (seconds, or 15m, 12h, "
           "7d)", _seconds),
    Option("ttl_sweep_interval", 600.0, "how often idle sessions are looked for (seconds)",
           _seconds),
    Option("alert_snippet_chars", 0, "put the first N characters of an entry's text into its "
           "alerts (evidence.snippet); 0 keeps text out of alerts", int),
    Option("heartbeat_prompt", "", "the heartbeat prompt OpenClaw is configured with "
           "(agents.defaults.heartbeat.prompt), if not its default: a user message with it "
           "opens a heartbeat turn"),
    Option("batch_size", 4000, "most records processed as one batch", int),
    Option("web_host", "127.0.0.1", "bind address of the stats and metrics endpoints"),
    Option("web_port", 6066, "port of the stats and metrics endpoints", int),
    Option("startup_deadline", 60.0, "give up (exit 1) when no broker answers within this long "
           "(seconds; 0: never); for the gateway source, when the gateway has not accepted a "
           "connection", _seconds),
    Option("stall_timeout", 120.0, "exit (code 3, for a restart) when assigned partitions have "
           "unprocessed records but none was processed for this long (seconds; 0: never)",
           _seconds),
    Option("session_timeout", 10.0, "consumer group session timeout (seconds)", float),
    Option("processing_guarantee", "auto", "at_least_once, exactly_once_v2 (outputs, state and "
           "input offsets committed in one transaction per input partition; a broker without "
           "transactions refuses it) or auto (exactly once where the broker grants a "
           "transactional producer at start, else at least once)", processing_guarantee),
    Option("upgrade_from", "", "during a rolling upgrade from this release (0.1, 0.2, 0.3), "
           "write the state in the format it reads; unset once no worker of it runs "
           "(docs/upgrading.md)",
           upgrade_from),
    Option("log_level", "info", "worker log level (debug, info, warning, error, critical)",
           log_level),
    Option("security_protocol", "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
    Option("ssl_cafile", "", "CA certificate (PEM) that signed the broker's certificate"),
    Option("ssl_certfile", "", "client certificate (PEM), for brokers that require one"),
    Option("ssl_keyfile", "", "private key (PEM) of the client certificate"),
    Option("sasl_mechanism", "PLAIN", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    Option("sasl_username", "", "SASL user name"),
    Option("sasl_password", "", "SASL password (prefer the environment variable to the flag)"),
)


@dataclass(frozen=True)
class Settings:
    broker: str
    partitions: int
    replication: int
    app_id: str
    data_dir: str
    input_topic: str
    clean_topic: str
    alerts_topic: str
    dlq_topic: str
    max_ids: int
    session_ttl: float
    ttl_sweep_interval: float
    alert_snippet_chars: int
    heartbeat_prompt: str
    batch_size: int
    web_host: str
    web_port: int
    startup_deadline: float
    stall_timeout: float
    session_timeout: float
    processing_guarantee: str
    upgrade_from: str
    log_level: str
    security_protocol: str
    ssl_cafile: str
    ssl_certfile: str
    ssl_keyfile: str
    sasl_mechanism: str
    sasl_username: str
    sasl_password: str

    @property
    def bootstrap(self) -> str:
        """host:port list for clients that take no URL scheme."""
        return ",".join(url.split("://", 1)[-1] for url in self.broker.split(","))

    @property
    def output_topics(self) -> tuple[str, str, str]:
        return self.clean_topic, self.alerts_topic, self.dlq_topic

    @classmethod
    def load(
        cls, args: argparse.Namespace | None = None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        """Flags win over environment variables, which win over defaults."""
        environ = os.environ if environ is None else environ
        values = {}
        for option in OPTIONS:
            given = getattr(args, option.name, None) if args is not None else None
            if given is not None:
                values[option.name] = given
            elif option.env in environ:
                values[option.name] = option.parse(environ[option.env])
            else:
                values[option.name] = option.default
        return cls(**values)

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a process run with these settings (a worker started by `dev`, a
        test or the benchmark): `base` (default this process's) without its SESSION_STREAM_*
        variables, then every option."""
        base = os.environ if base is None else base
        env = {k: v for k, v in base.items() if not k.startswith(ENV_PREFIX)}
        env.update({option.env: str(getattr(self, option.name)) for option in OPTIONS})
        return env

    def limits(self, **more: int) -> Limits:
        """The engine's limits these settings ask for (and `more`, as the worker's state
        format): one place for the worker, `clean` and the benchmark's peer."""
        return Limits(max_ids=self.max_ids, snippet_chars=self.alert_snippet_chars,
                      heartbeat_prompt=self.heartbeat_prompt, **more)

    def replace(self, **changes: object) -> Settings:
        current = {f.name: getattr(self, f.name) for f in fields(self)}
        return Settings(**{**current, **changes})


# Every subcommand that talks to Kafka takes these, whatever else it takes.
CONNECTION_OPTIONS = (
    "broker",
    "security_protocol",
    "ssl_cafile",
    "ssl_certfile",
    "ssl_keyfile",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
)


def add_options(parser: argparse.ArgumentParser, names: tuple[str, ...] | None = None, *,
                connection: bool = True, environment: bool = True) -> None:
    """Flags for the named options and, with `connection`, the connection options (all options
    by default). Unset flags fall back to the environment, or with `environment` off (a command
    that talks to no broker and reads no SESSION_STREAM_* variable) to the defaults."""
    wanted = None if names is None else {*names, *(CONNECTION_OPTIONS if connection else ())}
    for option in OPTIONS:
        if wanted is not None and option.name not in wanted:
            continue
        source = f"env {option.env}, " if environment else ""
        parser.add_argument(
            option.flag,
            dest=option.name,
            type=option.parse,
            default=None,
            help=f"{option.help} [{source}default {option.default}]",
        )



def markdown_table() -> str:
    """The configuration reference of docs/configuration.md; a test keeps the page equal to it."""
    rows = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    rows += [
        f"| `{o.flag}` | `{o.env}` | `{o.default}` | {o.help} |" for o in OPTIONS
    ]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
