"""Running a connector's calls: the agent's call and, on rollback, its inverse.

Both run the same way wherever they run (the SDK's guard, the SDK's embedded-mode undo, the server's undo):

- with their idempotency key, the action's for the call and the action's undo key for its inverse, on every
  attempt, so a retried call is applied at most once;
- retried (:mod:`agentrein_core.retry`) only on failures the connector judges transient, and the agent's call
  only when the caller listed it as ``retryable``;
- an async client's inverse is awaited on the event loop the client belongs to. Inverses run in worker
  threads (the engine's rollback is synchronous), so the loop is reached from outside; a rollback asked for on
  the loop's own thread would block the loop it needs, and is refused with the way out instead.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agentrein_core.connector import Connector, PreparedCall
from agentrein_core.errors import AgentReinError, UndoError
from agentrein_core.model import Action
from agentrein_core.redaction import REDACTED
from agentrein_core.retry import async_retrying, retrying

log = logging.getLogger("agentrein")


def run_call(connector: Connector, call: PreparedCall, key: str, *, retryable: bool) -> Any:
    """Make the agent's call with idempotency ``key`` and return its result; when ``retryable``, transient
    failures are retried with the same key."""
    if not retryable:
        return call.run(key)
    for attempt in retrying(connector.is_transient):
        with attempt:
            return call.run(key)
    raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover


async def run_call_async(connector: Connector, call: PreparedCall, key: str, *, retryable: bool) -> Any:
    """:func:`run_call` for an async client's call (``call.is_async``), awaited on the running loop."""
    if not retryable:
        return await call.run(key)
    async for attempt in async_retrying(connector.is_transient):
        with attempt:
            return await call.run(key)
    raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover


def run_inverse(
    connector: Connector,
    action: Action,
    client: Any,
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    close_after: bool = False,
) -> None:
    """Undo ``action`` through ``client`` with the action's undo idempotency key, retrying what the connector
    judges transient; return once the effect is gone, raise otherwise. ``close_after``: ``client`` was made
    for this inverse (from stored settings, or reopened), and is closed once it is through.

    An async client's inverse is awaited on ``loop``, the loop the client belongs to, while that loop runs in
    another thread; on one fresh loop for every attempt and the closing when none is given or it has stopped.
    Called on ``loop``'s own thread, it raises :class:`AgentReinError` and sends nothing."""
    undo = action.undo
    assert undo is not None
    redacted = _redacted_param(undo.params)
    if redacted is not None:
        # Sent as stored, it would not be the inverse the agent described (a 404 for a redacted URL would
        # even pass for "already undone"): refused, so the rollback says it failed.
        raise UndoError(
            f"the undo of {action.api_name} cannot run: its {redacted} held a secret, which AgentRein does not "
            "store; undo this action by hand"
        )

    def worth_again(error: BaseException) -> bool:
        return connector.is_transient(error) or _outcome_unknown(error)

    with _Awaiter(loop) as await_:
        try:
            for attempt in retrying(worth_again):
                with attempt:
                    await_(connector.run_undo(undo, client, action.undo_idempotency_key))
        finally:
            if close_after:
                _close(client, await_)


def _redacted_param(params: Any, where: str = "") -> str | None:
    """The name of the first parameter (``url``, ``body.token``) whose stored value was redacted, if any."""
    if isinstance(params, dict):
        found = (_redacted_param(v, f"{where}.{k}" if where else str(k)) for k, v in params.items())
    elif isinstance(params, list):
        found = (_redacted_param(v, f"{where}[{i}]") for i, v in enumerate(params))
    else:
        return where or "parameters" if isinstance(params, str) and REDACTED in params else None
    return next((name for name in found if name is not None), None)


def _outcome_unknown(error: BaseException) -> bool:
    """An async client whose event loop has ended fails *after* its request may have gone out (its pooled
    connection belonged to that loop): the inverse may be done, so it is never taken as not done, and is
    tried again under the same key (a repeated inverse finds its effect gone and succeeds harmlessly)."""
    return isinstance(error, RuntimeError) and str(error) == "Event loop is closed"


class _Awaiter:
    """Sees an inverse's outcome through: a sync client's has already run; an async client's is awaited on its
    client's running loop, else on a fresh loop kept for the whole inverse, so that the connections an
    attempt opens there are reused and closed on the loop they belong to."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._loop = loop
        self._fresh: asyncio.Runner | None = None

    def __enter__(self) -> _Awaiter:
        return self

    def __exit__(self, *_: object) -> None:
        if self._fresh is not None:
            self._fresh.close()

    def __call__(self, outcome: Any) -> None:
        if not asyncio.iscoroutine(outcome):
            return
        loop = self._loop
        if loop is None or not loop.is_running():
            self._fresh = self._fresh or asyncio.Runner()
            self._fresh.run(outcome)
            return
        if _running_loop() is loop:
            outcome.close()  # not started, so nothing was sent
            raise AgentReinError(
                "an async client's rollback cannot run on its own event loop thread; "
                "call `await asyncio.to_thread(ar.rollback_session, session)` instead"
            )
        asyncio.run_coroutine_threadsafe(outcome, loop).result()


def _close(client: Any, await_: _Awaiter) -> None:
    """Close a client made for one inverse: ``aclose()`` awaited where its requests were, else ``close()``.
    The inverse's outcome is known by now, so a failure to close is logged and changes nothing."""
    try:
        aclose = getattr(client, "aclose", None)
        if callable(aclose):
            await_(aclose())
            return
        close = getattr(client, "close", None)
        if callable(close):
            close()
    except Exception:
        log.warning("could not close the client of an inverse", exc_info=True)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
