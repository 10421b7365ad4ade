"""The loopback HTTP server the demo's fakes run on: 127.0.0.1, a free port, a thread of its own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler], name: str) -> Iterator[ThreadingHTTPServer]:
    """Serve ``handler`` on 127.0.0.1 until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, name=name, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def url_of(server: ThreadingHTTPServer | None) -> str:
    assert server is not None, "the fake is not running"
    return f"http://127.0.0.1:{server.server_address[1]}"
