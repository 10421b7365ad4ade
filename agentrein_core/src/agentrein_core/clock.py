"""Time, in one place: every timestamp AgentRein stores is an aware UTC ``datetime``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)
