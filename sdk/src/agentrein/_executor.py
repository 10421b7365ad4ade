"""Embedded-mode undo: inverses run through the very clients the agent wrapped (their credentials, their
base URL), retried like the calls themselves; failing those, through the organisation's stored settings."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attrs import define, field

from agentrein_core.model import Action
from agentrein_core.plugins import Connectors
from agentrein_core.read_models import SessionInfo
from agentrein_core.runner import run_inverse
from agentrein_core.statuses import SessionStatus

if TYPE_CHECKING:
    from agentrein_core.settings_undo import SettingsUndoExecutor


@define
class ClientRef:
    """A wrapped client and, for an async client, the event loop its calls ran on."""

    client: Any
    loop: asyncio.AbstractEventLoop | None = None


@define
class ClientUndoExecutor:
    """An :class:`~agentrein_core.rollback.UndoExecutor` over the clients wrapped in this process.

    An action is undone with the client that made it while that client is open (and its session still
    ``ACTIVE``: which client made each action is forgotten when the session ends); else with the newest open
    client the same session wrapped for the same connector (the action was made by another process, or by a
    client closed since); else through a client the connector reopens from the closed one. With ``stored``,
    an action of a session that wrapped no client here for its connector is undone through the organisation's
    stored connector settings, when that connector is enabled (see :mod:`agentrein_core.connector`)."""

    connectors: Connectors
    stored: SettingsUndoExecutor | None = None
    #: The client that made each action, by session: forgotten when the session ends (:meth:`forget_if_ended`), so
    #: that a long-running process keeps nothing per action of its finished sessions.
    _by_action: dict[str, dict[str, ClientRef]] = field(factory=dict)
    #: The clients each session wrapped for each connector, the most recently wrapped or used last.
    _by_session: dict[tuple[str, str], list[ClientRef]] = field(factory=dict)
    _lock: threading.Lock = field(factory=threading.Lock)
    #: Told when a session's rollback may have become runnable here (a client wrapped for it): embedded
    #: mode's supervisor then looks at once for a rollback of it left to run.
    learned: Callable[[], None] | None = None

    def remember(self, action: Action, ref: ClientRef) -> None:
        with self._lock:
            self._by_action.setdefault(action.session_id, {})[action.action_id] = ref
            new = self._add(action.session_id, action.connector, ref)
        if new and self.learned is not None:
            self.learned()

    def forget_if_ended(self, session: SessionInfo) -> None:
        """``session`` as it stands after completing or rolling back: once it is no longer ``ACTIVE`` it takes
        no more actions, so which client made each is forgotten; a later rollback of it runs through the
        newest open client it wrapped for the action's connector (or the stored settings), as for an action
        another process made."""
        if session.status is not SessionStatus.ACTIVE:
            with self._lock:
                self._by_action.pop(session.id, None)

    def remember_session(self, session_id: str, connector: str, ref: ClientRef) -> None:
        with self._lock:
            new = self._add(session_id, connector, ref)
        if new and self.learned is not None:
            self.learned()

    def _add(self, session_id: str, connector: str, ref: ClientRef) -> bool:
        """Whether ``ref`` is a client this session had not wrapped for ``connector`` before."""
        refs = self._by_session.setdefault((session_id, connector), [])
        new = all(known.client is not ref.client for known in refs)
        refs[:] = [known for known in refs if known.client is not ref.client]
        refs.append(ref)
        return new

    def on_this_threads_loop(self, session_id: str) -> bool:
        """Whether an async client of the session belongs to the event loop running in this thread: its
        inverses would have to run on the very loop this thread blocks while it waits for them."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return False
        with self._lock:
            return any(
                sid == session_id and ref.loop is running for (sid, _), refs in self._by_session.items() for ref in refs
            )

    def sessions_of(self, connectors: list[str]) -> list[str]:
        """The sessions this process wrapped a client of one of ``connectors`` for."""
        with self._lock:
            return sorted({sid for sid, name in self._by_session if name in connectors})

    def knows_session(self, session_id: str) -> bool:
        with self._lock:
            return any(sid == session_id for sid, _ in self._by_session)

    def _candidates(self, action: Action) -> list[ClientRef]:
        """The clients that may undo ``action``, in the order they are preferred when open: its own, then the
        session's for its connector, newest first."""
        with self._lock:
            own = self._by_action.get(action.session_id, {}).get(action.action_id)
            wrapped = reversed(self._by_session.get((action.session_id, action.connector), []))
            return [own] + [ref for ref in wrapped if ref.client is not own.client] if own else list(wrapped)

    def can_run(self, action: Action) -> bool:
        if action.connector not in self.connectors.names():
            return False
        return bool(self._candidates(action)) or (self.stored is not None and self.stored.enabled_for(action))

    @property
    def hands_over(self) -> bool:
        return False  # another process of the agent's (one that wrapped a client for the session) runs it

    def run_undo(self, action: Action) -> None:
        connector = self.connectors.get(action.connector)
        candidates = self._candidates(action)
        if not candidates:
            assert self.stored is not None  # can_run said so
            self.stored.run_undo(action)
            return
        for ref in candidates:
            if not connector.is_closed(ref.client):
                run_inverse(connector, action, ref.client, loop=ref.loop)
                return
        closed = candidates[0]  # the action's own client when this process made it
        client = connector.reopen(closed.client)
        run_inverse(connector, action, client, loop=closed.loop, close_after=client is not closed.client)
