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
        #: The request whose answer is to be lost next (``"METHOD /path"`` prefix), and what then.
        self.losing: str | None = None
        self.pause_after_losing = False
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
            lost = threading.Event()  # this connection's next answer is to be lost
            threading.Thread(target=self._pipe, args=(client, upstream, True, lost), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False, lost), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, to_target: bool, lost: threading.Event) -> None:
        seen = b""  # the end of what went before, in case a request line is split between two reads
        with suppress(OSError):
            while data := src.recv(65536):
                if to_target:
                    seen += data
                    end = 0
                    for found in _REQUEST_LINE.finditer(seen):
                        request = f"{found[1].decode()} {found[2].decode()}"
                        self.requests.append(request)
                        if self.losing is not None and request.startswith(self.losing):
                            self.losing = None
                            lost.set()
                        end = found.end()
                    seen = seen[end:][-200:]
                elif lost.is_set():  # the server has answered, so it did what was asked: the agent never hears
                    self._lose(src, dst)
                    return
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

    def lose_answer(self, request: str, *, then_pause: bool = False) -> None:
        """Lose the answer to the next request that starts with ``request`` (``"POST /sessions/x/actions"``):
        it reaches the server, which answers, but the connection is closed before the agent hears it.
        ``then_pause``: an outage begins at that moment (:meth:`pause`), so that nothing asked again gets through."""
        self.pause_after_losing = then_pause
        self.losing = request

    def _lose(self, upstream: socket.socket, client: socket.socket) -> None:
        if self.pause_after_losing:
            self.pause()
        for s in (client, upstream):
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
