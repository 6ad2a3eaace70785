"""The pure cleaning engine: no I/O, no asyncio, no Kafka; every adapter runs this."""

from stream import pure

# Compiled or Python source, chosen here: the install compiles the modules beside this file
# into _compiled/ (setup.py), searched first unless SESSION_STREAM_PURE_PYTHON=1 asks for the
# source (stream/pure.py); without them (no C compiler) the import fails and the source runs.
try:
    if pure.requested():
        raise ImportError(f"{pure.ENV}=1")
    from stream.engine import _compiled
except ImportError:
    pass
else:
    __path__ = [*_compiled.__path__, *__path__]


from stream.engine.context import Limits
from stream.engine.engine import DROP_RULES, Engine
from stream.engine.records import (
    Action,
    Alert,
    DeadLetter,
    FileSource,
    KafkaSource,
    Severity,
    Source,
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
    "FileSource",
    "KafkaSource",
    "Limits",
    "Memory",
    "Session",
    "SessionState",
    "Severity",
    "Source",
    "Verdict",
]
