"""Embedded-mode undo: inverses run through the very clients the agent wrapped (their credentials, their
base URL), retried like the calls themselves."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from attrs import define, field

from agentrein_core.connector import run_undo_retrying
from agentrein_core.errors import AgentReinError
from agentrein_core.model import Action
from agentrein_core.plugins import Connectors


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
        loop = ref.loop

        def settle(outcome: Any) -> None:
            if asyncio.iscoroutine(outcome):
                _await_from_thread(outcome, loop)

        run_undo_retrying(self.connectors.get(action.connector), action, ref.client, settle)


def _await_from_thread(coro: Any, loop: asyncio.AbstractEventLoop | None) -> Any:
    """Run an async client's inverse on the loop the client belongs to, from a worker thread."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is not None and loop.is_running():
        if running is loop:
            coro.close()
            raise AgentReinError(
                "an async client's rollback cannot run on its own event loop thread; "
                "call `await asyncio.to_thread(ar.rollback_session, session)` instead"
            )
        return asyncio.run_coroutine_threadsafe(coro, loop).result()
    return asyncio.run(coro)
