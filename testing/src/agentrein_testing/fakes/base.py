"""What every loopback fake shares: serving on 127.0.0.1 from a thread of its own, the requests it received,
injected faults, held requests, and the replay of a repeated idempotent request.

A fake subclasses :class:`LoopbackFake` and says how to record a request (``_record``), what it does
(``_effect``), how it fails when told to (``_fault_reply``) and, if its service has idempotency keys, which
requests share one (``_idempotency_scope``). Every request then goes the same way:

1. it is recorded (``calls()`` shows it from now on);
2. the fake may refuse it outright (``_refusal``: a malformed or unauthenticated request);
3. a fault injected for it (``fail_next``) answers now, or, with ``after_effect``, once the effect happened;
4. a repeat of an idempotency key replays the first answer; a repeat while the first is still running is refused
   (``_key_in_use``);
5. a held request (``hold``) waits until it is released;
6. the effect happens, under the fake's lock, and its answer is saved for the idempotency key.

Faults and holds match a request by method and by its path as ``calls()`` records it.
"""

from __future__ import annotations

import json
import socket
import threading
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager, suppress
from fnmatch import fnmatchcase
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from attrs import define, field

JSON = dict[str, Any]  # a JSON object, as fakes read and answer them

#: How long a held request waits for its release before it goes on anyway.
HOLD_TIMEOUT = 120


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler], name: str) -> Iterator[ThreadingHTTPServer]:
    """Serve ``handler`` on 127.0.0.1, on a free port, until the block ends."""
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


@define
class Request:
    """One request as it came in: ``target`` is the path with its query; header names are lower-case."""

    method: str
    target: str
    headers: Mapping[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query_string(self) -> str:
        return self.target.partition("?")[2]

    def json_body(self) -> Any:
        """The body as JSON (None when empty), or as text when it is not JSON."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return self.body.decode("utf-8", "replace")


@define
class Reply:
    """An answer to send: its ``headers`` are complete but for ``Content-Length``."""

    status: int
    headers: dict[str, str]
    body: bytes

    @classmethod
    def json(
        cls, status: int, data: Any, headers: Mapping[str, str] | None = None, *, content_type: str = "application/json"
    ) -> Reply:
        return cls(status, {**(headers or {}), "Content-Type": content_type}, json.dumps(data).encode())


@define
class Fault:
    """Fail the next ``times`` requests of ``method`` whose path matches ``path_glob`` (fnmatch): with
    ``status``, or, when it is None, by dropping the connection without an answer. ``after_effect``: the
    request takes effect first (and its answer is saved for its idempotency key); only the answer is lost."""

    method: str
    path_glob: str
    status: int | None
    times: int
    after_effect: bool


class Record(Protocol):
    """What a fake keeps of each request it received."""

    method: str
    path: str
    status: int | None  # what the fake answered; None: the connection was dropped


RecordT = TypeVar("RecordT", bound=Record)
FaultT = TypeVar("FaultT", bound=Fault)


@define
class Saved(Generic[RecordT]):
    """The first answer to an idempotency key, and the request it answered."""

    record: RecordT
    reply: Reply


Gates = tuple[threading.Event, threading.Event]


@define
class LoopbackFake(ABC, Generic[RecordT, FaultT]):
    """A stateful fake on 127.0.0.1. Start it with :meth:`running`; ``base_url`` is then
    ``http://127.0.0.1:<port>``. ``requests`` is every request received, oldest first (give a list of your own
    to watch them arrive)."""

    thread_name: ClassVar[str] = "loopback-fake"

    requests: list[RecordT] = field(factory=list)
    _faults: list[FaultT] = field(factory=list, init=False)
    _holds: dict[tuple[str, str], Gates] = field(factory=dict, init=False)
    _saved: dict[Hashable, Saved[RecordT]] = field(factory=dict, init=False)
    _in_flight: set[Hashable] = field(factory=set, init=False)
    _lock: threading.RLock = field(factory=threading.RLock, init=False)
    _server: ThreadingHTTPServer | None = field(default=None, init=False)

    @property
    def base_url(self) -> str:
        return url_of(self._server)

    @contextmanager
    def running(self) -> Iterator[Self]:
        with serve(_handler_for(self), self.thread_name) as self._server:
            yield self
        self._server = None

    # test controls -------------------------------------------------------------------------------------
    def hold(self, method: str, path: str) -> Gates:
        """Make the next ``method path`` request wait before it takes effect: returns (arrived, release);
        ``arrived`` is set once the request is in (its idempotency key then counts as in use), and it goes on
        once ``release`` is set."""
        gates = (threading.Event(), threading.Event())
        with self._lock:
            self._holds[(method.upper(), path)] = gates
        return gates

    def calls(self, method: str | None = None, path_glob: str = "*") -> list[RecordT]:
        """The requests received so far, oldest first; optionally only one method, and paths matching a glob."""
        with self._lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method.upper()) and fnmatchcase(r.path, path_glob)
            ]

    def _inject(self, fault: FaultT) -> None:
        """What each fake's ``fail_next`` does with the fault it describes."""
        with self._lock:
            self._faults.append(fault)

    # what a fake says ----------------------------------------------------------------------------------
    @abstractmethod
    def _record(self, request: Request) -> RecordT:
        """What ``calls()`` keeps of the request."""

    @abstractmethod
    def _effect(self, request: Request, record: RecordT) -> tuple[Reply, bool]:
        """Do what the request asks (the fake's lock is held); the answer, and whether to save it for the
        request's idempotency key."""

    @abstractmethod
    def _fault_reply(self, fault: FaultT, status: int, record: RecordT) -> Reply:
        """The answer of an injected fault with a ``status`` (a fault without one drops the connection)."""

    def _refusal(self, request: Request, record: RecordT) -> Reply | None:
        """An answer given before anything else (faults included), or None to go on."""
        return None

    def _idempotency_scope(self, record: RecordT) -> Hashable | None:
        """What requests answered once and then replayed share (an idempotency key, say); None: every
        request takes effect."""
        return None

    def _replay(self, saved: Saved[RecordT], record: RecordT) -> Reply:
        """The answer to a request whose scope was answered before."""
        return saved.reply

    def _key_in_use(self, record: RecordT) -> Reply:
        """The answer to a request whose scope's first request is still running."""
        raise NotImplementedError(f"{type(self).__name__} has idempotency scopes but no answer for one in use")

    # serving -------------------------------------------------------------------------------------------
    def _respond(self, request: Request) -> Reply | None:
        """The answer to one request, or None to drop the connection."""
        record = self._record(request)
        with self._lock:
            self.requests.append(record)
        reply = self._refusal(request, record)
        if reply is None:
            reply = self._with_faults(request, record)
        record.status = None if reply is None else reply.status
        return reply

    def _with_faults(self, request: Request, record: RecordT) -> Reply | None:
        with self._lock:
            fault = self._take_fault(record.method, record.path)
        if fault is not None and not fault.after_effect:
            return self._failed(fault, record)
        reply = self._once(request, record)
        if fault is not None:  # the effect happened (and is saved for its key); the answer is lost
            return self._failed(fault, record)
        return reply

    def _take_fault(self, method: str, path: str) -> FaultT | None:
        for fault in self._faults:
            if fault.method == method and fnmatchcase(path, fault.path_glob) and fault.times > 0:
                fault.times -= 1
                return fault
        return None

    def _failed(self, fault: FaultT, record: RecordT) -> Reply | None:
        return None if fault.status is None else self._fault_reply(fault, fault.status, record)

    def _once(self, request: Request, record: RecordT) -> Reply:
        """The effect, at most once per idempotency scope."""
        scope = self._idempotency_scope(record)
        with self._lock:
            if scope is not None:
                if scope in self._in_flight:
                    return self._key_in_use(record)
                saved = self._saved.get(scope)
                if saved is not None:
                    return self._replay(saved, record)
                self._in_flight.add(scope)
            held = self._holds.pop((record.method, record.path), None)
        try:
            if held is not None:
                arrived, release = held
                arrived.set()
                release.wait(timeout=HOLD_TIMEOUT)
            with self._lock:
                reply, save = self._effect(request, record)
                if scope is not None and save:
                    self._saved[scope] = Saved(record, reply)
        finally:
            if scope is not None:
                with self._lock:
                    self._in_flight.discard(scope)
        return reply


def _handler_for(fake: LoopbackFake[Any, Any]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart (delayed ACK)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read the fake's calls()
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = fake._respond(Request(self.command, self.path, headers, body))
            if reply is None:  # a dropped connection: the client sees it closed without an answer
                self.close_connection = True
                with suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler
