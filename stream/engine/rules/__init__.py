from stream import pure

# Compiled or Python source, chosen here (stream/pure.py).
__path__ = pure.search_path(__name__, __path__)
