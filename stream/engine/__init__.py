"""The pure cleaning engine: no I/O, no asyncio, no Kafka; every adapter runs this."""

from stream import pure

# Compiled or Python source, chosen here (stream/pure.py).
__path__ = pure.search_path(__name__, __path__)


from stream.engine.context import Limits
from stream.engine.engine import DROP_RULES, Engine
from stream.engine.records import (
    Action,
    Alert,
    DeadLetter,
    FileOrigin,
    KafkaOrigin,
    Origin,
    Severity,
    Verdict,
)
from stream.engine.state import DictMemory, Memory, Session, SessionState

__all__ = [
    "DROP_RULES",
    "Action",
    "Alert",
    "DeadLetter",
    "DictMemory",
    "Engine",
    "FileOrigin",
    "KafkaOrigin",
    "Limits",
    "Memory",
    "Origin",
    "Session",
    "SessionState",
    "Severity",
    "Verdict",
]
