"""What every Kafka client and topic of the project is configured with: the broker's address,
TLS and SASL from Settings, and the record size limit."""

from __future__ import annotations

import ssl

import faust
from aiokafka.helpers import create_ssl_context

from stream.settings import Settings

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Transcript lines with images or long tool results reach megabytes; Kafka's default 1 MB
# limit would turn them into poison pills. Every topic of the project is created with this.
MAX_RECORD_BYTES = 16 * 1024 * 1024
# retention.ms explicitly: Tansu reports DescribeConfigs as empty for a topic created without
# configs, which breaks clients that look up retention.ms.
TOPIC_CONFIG = {"retention.ms": "-1", "max.message.bytes": str(MAX_RECORD_BYTES)}
COMPACTED_TOPIC_CONFIG = {**TOPIC_CONFIG, "cleanup.policy": "compact"}
# What the producers and consumers wait for a broker's answer: bounds start-up against a dead
# or unreachable broker, and every produce and fetch request.
REQUEST_TIMEOUT_MS = 15_000


class SecurityError(ValueError):
    """The security settings contradict each other."""


def ssl_context(settings: Settings) -> ssl.SSLContext | None:
    if "SSL" not in settings.security_protocol.upper():
        return None
    return create_ssl_context(
        cafile=settings.ssl_cafile or None,
        certfile=settings.ssl_certfile or None,
        keyfile=settings.ssl_keyfile or None,
    )


def client_options(settings: Settings) -> dict:
    """Keyword arguments for aiokafka's producer, consumer, client and admin client."""
    protocol = settings.security_protocol.upper()
    if protocol not in PROTOCOLS:
        raise SecurityError(f"unknown security protocol {protocol!r}; use one of {PROTOCOLS}")
    options: dict = {"bootstrap_servers": settings.bootstrap, "security_protocol": protocol}
    context = ssl_context(settings)
    if context is not None:
        options["ssl_context"] = context
    if protocol.startswith("SASL"):
        options.update(
            sasl_mechanism=settings.sasl_mechanism,
            sasl_plain_username=settings.sasl_username,
            sasl_plain_password=settings.sasl_password,
        )
    return options


def faust_credentials(settings: Settings) -> faust.types.auth.CredentialsT | None:
    protocol = settings.security_protocol.upper()
    if protocol.startswith("SASL"):
        return faust.SASLCredentials(
            username=settings.sasl_username,
            password=settings.sasl_password,
            ssl_context=ssl_context(settings),
            mechanism=settings.sasl_mechanism,
        )
    if protocol == "SSL":
        return faust.SSLCredentials(ssl_context(settings))
    return None
