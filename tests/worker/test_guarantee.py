"""--processing-guarantee: at_least_once asks the broker nothing; auto runs exactly once where the
broker grants a transactional producer and says in one line why not where it does not;
exactly_once_v2 refuses to start there. Against the real brokers:
tests/integration/test_processing_guarantee.py."""

from __future__ import annotations

import argparse
import logging

import pytest

from stream.settings import OPTIONS, Settings, add_options, markdown_table
from stream.worker import guarantee
from stream.worker.guarantee import GuaranteeRefused, exactly_once

REFUSAL = "it refused InitProducerId (UnknownError)"


def settings(choice: str) -> Settings:
    return Settings.load(environ={"SESSION_STREAM_PROCESSING_GUARANTEE": choice,
                                  "SESSION_STREAM_BROKER": "kafka://127.0.0.1:9"})


@pytest.fixture
def broker_answers(monkeypatch):
    """What the probe finds: None (a transactional producer granted) or why not."""
    asked: list[str] = []

    def answer(refusal: str | None) -> list[str]:
        async def probe(settings: Settings) -> str | None:
            asked.append(settings.app_id)
            return refusal

        monkeypatch.setattr(guarantee, "transactions_refused", probe)
        return asked

    return answer


def test_at_least_once_asks_the_broker_nothing(broker_answers) -> None:
    asked = broker_answers(None)
    assert exactly_once(settings("at_least_once")) is False
    assert asked == []


@pytest.mark.parametrize("choice", ["auto", "exactly_once_v2"])
def test_exactly_once_where_the_broker_grants_a_transactional_producer(broker_answers,
                                                                      choice: str) -> None:
    asked = broker_answers(None)
    assert exactly_once(settings(choice)) is True
    assert asked == ["session-stream"]


def test_auto_runs_at_least_once_elsewhere_and_says_why_in_one_line(broker_answers,
                                                                     caplog) -> None:
    broker_answers(REFUSAL)
    with caplog.at_level(logging.INFO, logger="stream.worker.guarantee"):
        assert exactly_once(settings("auto")) is False
    (line,) = [r for r in caplog.records if r.name == "stream.worker.guarantee"]
    assert line.levelno == logging.WARNING
    assert "at least once" in line.getMessage() and REFUSAL in line.getMessage()
    assert "127.0.0.1:9" in line.getMessage()


def test_exactly_once_v2_refuses_to_start_without_transactions(broker_answers) -> None:
    broker_answers(REFUSAL)
    with pytest.raises(GuaranteeRefused, match="exactly_once_v2.*" + REFUSAL.replace("(", r"\(")
                       .replace(")", r"\)")):
        exactly_once(settings("exactly_once_v2"))


def test_the_setting_is_a_flag_a_variable_and_a_row_of_the_table() -> None:
    assert Settings.load(environ={}).processing_guarantee == "auto"
    parser = argparse.ArgumentParser()
    add_options(parser)
    args = parser.parse_args(["--processing-guarantee", "AT_LEAST_ONCE"])
    assert Settings.load(args, environ={}).processing_guarantee == "at_least_once"
    with pytest.raises(SystemExit):
        parser.parse_args(["--processing-guarantee", "exactly_once"])
    assert "SESSION_STREAM_PROCESSING_GUARANTEE" in {o.env for o in OPTIONS}
    assert "| `--processing-guarantee` | `SESSION_STREAM_PROCESSING_GUARANTEE` | `auto` |" in (
        markdown_table())
