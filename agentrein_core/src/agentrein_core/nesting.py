"""How deeply the JSON AgentRein records may nest: one bound, checked before anything is stored.

Every reader of a record recurses through it: cattrs (``converter``) takes about three frames a level and
fails near 340 levels, the redactor near 500, ``json`` and msgspec near 1000 (Python's default recursion
limit). A value just under such a point can be stored and then never read again, so a record is held to
:data:`MAX_DEPTH` levels, a fifth of the weakest reader's reach, and far deeper than any real API answers.
"""

from __future__ import annotations

from typing import Any

from agentrein_core.errors import ValidationError
from agentrein_core.model import JSON

#: The most dicts and lists a recorded value may nest (``{"a": [1]}`` nests two).
MAX_DEPTH = 64
_CONTAINERS = (dict, list, tuple)


def too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests more than ``limit`` dicts and lists; found without recursion, so a value of
    any depth (or one that contains itself) can be asked about. Only containers are visited (this runs on
    every recorded call, several times)."""
    if not isinstance(value, _CONTAINERS):
        return False
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, level = pending.pop()
        if level > limit:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, _CONTAINERS):
                pending.append((child, level + 1))
    return False


def check(field: str, value: object) -> None:
    """Refuse a value nested too deeply to be read back, naming ``field``."""
    if too_deep(value):
        raise ValidationError(field, f"must be nested at most {MAX_DEPTH} levels deep")


def bounded(value: JSON) -> JSON:
    """What is recorded of a value that exists already (an upstream API's answer to a call that ran): the
    value itself, or a short marker when it nests too deeply to be recorded, so the call is still recorded."""
    return {"truncated": f"nested deeper than {MAX_DEPTH} levels"} if too_deep(value) else value
