"""A TCP relay on 127.0.0.1 through which tests reach a server, so that an outage can be real."""

from __future__ import annotations

import socket
import threading
from contextlib import suppress


class Relay:
    """A TCP relay on 127.0.0.1 to ``target``; `cut()` closes it and every connection through it for good,
    `pause()` and `resume()` make an outage that ends."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.refusing = False
        threading.Thread(target=self._accept, daemon=True).start()

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
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with suppress(OSError):
            while data := src.recv(65536):
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
