"""What a committed transaction tells the observers of its store (:meth:`~.connections.Store.observe`)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum


class Change(StrEnum):
    """What a committed transaction tells the observers of its store (:meth:`Store.observe`)."""

    #: An approval was decided (or expired): long-polls waiting on it look again.
    DECISION = "decision"
    #: A rollback started, resumed, paused or ended: rollback workers and waiters look again.
    ROLLBACK = "rollback"
    #: An approval was opened: whoever expires approvals looks at when it ends.
    APPROVAL = "approval"


Observer = Callable[[frozenset[Change]], None]
