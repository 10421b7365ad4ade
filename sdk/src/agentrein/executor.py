"""Embedded-mode undo: inverses run through the very clients the agent wrapped (their credentials, their
base URL), retried like the calls themselves."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from attrs import define, field

from agentrein_core.model import Action
from agentrein_core.plugins import Connectors
from agentrein_core.runner import run_inverse


@define
class ClientRef:
    """A wrapped client and, for an async client, the event loop its calls ran on."""

    client: Any
    loop: asyncio.AbstractEventLoop | None = None


@define
class ClientUndoExecutor:
    """An :class:`~agentrein_core.rollback.UndoExecutor` over the clients wrapped in this process.

    An action is undone with the client that made it; failing that (the action was made by another process),
    with the latest client the same session wrapped for the same connector."""

    connectors: Connectors
    _by_action: dict[str, ClientRef] = field(factory=dict)
    _by_session: dict[tuple[str, str], ClientRef] = field(factory=dict)
    _lock: threading.Lock = field(factory=threading.Lock)

    def remember(self, action: Action, ref: ClientRef) -> None:
        with self._lock:
            self._by_action[action.action_id] = ref
            self._by_session[(action.session_id, action.connector)] = ref

    def remember_session(self, session_id: str, connector: str, ref: ClientRef) -> None:
        with self._lock:
            self._by_session[(session_id, connector)] = ref

    def on_this_threads_loop(self, session_id: str) -> bool:
        """Whether an async client of the session belongs to the event loop running in this thread: its
        inverses would have to run on the very loop this thread blocks while it waits for them."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return False
        with self._lock:
            return any(sid == session_id and ref.loop is running for (sid, _), ref in self._by_session.items())

    def knows_session(self, session_id: str) -> bool:
        with self._lock:
            return any(sid == session_id for sid, _ in self._by_session)

    def _ref(self, action: Action) -> ClientRef | None:
        with self._lock:
            return self._by_action.get(action.action_id) or self._by_session.get((action.session_id, action.connector))

    def can_run(self, action: Action) -> bool:
        return self._ref(action) is not None and action.connector in self.connectors.names()

    def run_undo(self, action: Action) -> None:
        ref = self._ref(action)
        assert ref is not None
        run_inverse(self.connectors.get(action.connector), action, ref.client, loop=ref.loop)
