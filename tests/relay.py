"""A TCP relay on 127.0.0.1 through which tests reach a server, so that an outage (or a slow network) can be
real, and the HTTP requests sent through it counted."""

from __future__ import annotations

import re
import socket
import threading
import time
from contextlib import suppress

_REQUEST_LINE = re.compile(rb"(GET|POST|PATCH|PUT|DELETE) (\S+) HTTP/1\.1\r\n")


class Relay:
    """A TCP relay on 127.0.0.1 to ``target``; `cut()` closes it and every connection through it for good,
    `pause()` and `resume()` make an outage that ends. ``delay``: seconds each piece of the target's answers
    waits before it is passed on (a slow network). ``requests``: the HTTP requests sent through it, as
    ``"METHOD /path"``, in order."""

    def __init__(self, target: tuple[str, int], *, delay: float = 0.0) -> None:
        self.target = target
        self.delay = delay
        self.requests: list[str] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.refusing = False
        threading.Thread(target=self._accept, daemon=True).start()

    @classmethod
    def to_server(cls, url: str, *, delay: float = 0.0) -> Relay:
        """A relay to the server at ``url`` (``http://127.0.0.1:PORT``)."""
        return cls(("127.0.0.1", int(url.rsplit(":", 1)[1])), delay=delay)

    def url(self) -> str:
        """The server's address through the relay."""
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, to_target: bool) -> None:
        seen = b""  # the end of what went before, in case a request line is split between two reads
        with suppress(OSError):
            while data := src.recv(65536):
                if to_target:
                    seen += data
                    end = 0
                    for found in _REQUEST_LINE.finditer(seen):
                        self.requests.append(f"{found[1].decode()} {found[2].decode()}")
                        end = found.end()
                    seen = seen[end:][-200:]
                elif self.delay:
                    time.sleep(self.delay)
                dst.sendall(data)
        with suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        with suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not
        self.listener.close()
        for s in self.sockets:
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def pause(self) -> None:
        """An outage that ends: every connection is dropped, and new ones are closed at once."""
        self.refusing = True
        for s in self.sockets:
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        self.sockets.clear()

    def resume(self) -> None:
        self.refusing = False
