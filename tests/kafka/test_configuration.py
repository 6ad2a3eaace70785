"""TLS and SASL settings become the same client options for every Kafka client."""

from __future__ import annotations

import ssl

import faust
import pytest

from stream.kafka.configuration import SecurityError, client_options, faust_credentials
from stream.settings import Settings

BASE = Settings.load(environ={}).replace(broker="kafka://127.0.0.1:9093")


def test_plaintext_by_default() -> None:
    assert client_options(BASE) == {"bootstrap_servers": "127.0.0.1:9093",
                                    "security_protocol": "PLAINTEXT"}
    assert faust_credentials(BASE) is None


@pytest.mark.parametrize("protocol", ["SSL", "ssl"])
def test_ssl_gives_a_context_whatever_the_case(protocol: str) -> None:
    options = client_options(BASE.replace(security_protocol=protocol))
    assert options["security_protocol"] == "SSL"
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    assert isinstance(faust_credentials(BASE.replace(security_protocol=protocol)),
                      faust.SSLCredentials)


def test_sasl_ssl_carries_the_user_and_a_context() -> None:
    settings = BASE.replace(security_protocol="sasl_ssl", sasl_mechanism="SCRAM-SHA-512",
                            sasl_username="worker", sasl_password="s3cret")
    options = client_options(settings)
    assert (options["sasl_mechanism"], options["sasl_plain_username"],
            options["sasl_plain_password"]) == ("SCRAM-SHA-512", "worker", "s3cret")
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    assert isinstance(faust_credentials(settings), faust.SASLCredentials)


def test_an_unknown_protocol_is_refused() -> None:
    with pytest.raises(SecurityError, match="unknown security protocol 'TLS'"):
        client_options(BASE.replace(security_protocol="TLS"))
