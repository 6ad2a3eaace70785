"""The HTTP server both stand-ins run on: loopback, a free port, one thread per request."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # OpenClaw closes connections it is done with (a long poll at shutdown, a stream it
        # aborted); that is not the stand-in's error. Anything else is printed as usual.
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def serve(handler: type[BaseHTTPRequestHandler], name: str) -> LoopbackServer:
    server = LoopbackServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server
