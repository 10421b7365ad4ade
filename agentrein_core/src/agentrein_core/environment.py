"""Settings read from the environment, checked the same way wherever they are read."""

from __future__ import annotations

import os

from agentrein_core.errors import ValidationError


def positive_number(name: str, unit: str) -> float | None:
    """``$name`` as a positive number (of ``unit``), ``None`` when it is not set; anything else is refused,
    naming the variable, so a typo never silently falls back to a default."""
    raw = os.environ.get(name)
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValidationError(name, f"must be a positive number of {unit}, not {raw!r}")
    return value
