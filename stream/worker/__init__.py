from stream import pure

# Compiled or Python source, chosen here: the install compiles the modules beside this file
# into _compiled/ (setup.py), searched first unless SESSION_STREAM_PURE_PYTHON=1 asks for the
# source (stream/pure.py); without them (no C compiler) the import fails and the source runs.
try:
    if pure.requested():
        raise ImportError(f"{pure.ENV}=1")
    from stream.worker import _compiled
except ImportError:
    pass
else:
    __path__ = [*_compiled.__path__, *__path__]
