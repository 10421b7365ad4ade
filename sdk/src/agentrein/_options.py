"""The options of one ``wrap()`` call, checked once when the client is wrapped."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any, Literal

from attrs import frozen

from agentrein_core import nesting
from agentrein_core.connector import Connector, PreparedCall
from agentrein_core.errors import ValidationError
from agentrein_core.policies import validate_glob

FailureMode = Literal["open", "closed"]


def checked_failure_mode(value: str) -> FailureMode:
    """What an agent does when AgentRein cannot be reached: ``open`` goes on (journaled), ``closed`` stops."""
    if value == "open":
        return "open"
    if value == "closed":
        return "closed"
    raise ValidationError("failure_mode", f"must be 'open' or 'closed', not {value!r}")


@frozen
class WrapOptions:
    connector: Connector
    requires_approval: tuple[str, ...]
    retryable: tuple[str, ...]
    poll_interval: float  # seconds
    timeout: float  # seconds
    failure_mode: FailureMode
    undo: Mapping[str, Mapping[str, Any]]  # api-name glob -> undo override

    @classmethod
    def build(
        cls,
        connector: Connector,
        *,
        requires_approval: Iterable[str],
        retryable: Iterable[str],
        poll_interval_ms: int,
        timeout_ms: int,
        failure_mode: str,
        undo: Mapping[str, Mapping[str, Any]] | None,
    ) -> WrapOptions:
        mode = checked_failure_mode(failure_mode)
        for name, value in (("poll_interval_ms", poll_interval_ms), ("timeout_ms", timeout_ms)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValidationError(name, f"must be a positive number of milliseconds, not {value!r}")
        overrides = {} if "undo" in connector.wrap_options else dict(undo or {})
        for glob, override in overrides.items():
            validate_glob(f"undo[{glob!r}]", glob)
            if not isinstance(override, Mapping):
                raise ValidationError(f"undo[{glob!r}]", "must be a mapping such as {'type': 'none'}")
            connector.check_undo_override(glob, override)
            nesting.check(f"undo[{glob!r}]", dict(override))  # its keys become stored undo params
        return cls(
            connector=connector,
            requires_approval=_globs("requires_approval", requires_approval),
            retryable=_globs("retryable", retryable),
            poll_interval=poll_interval_ms / 1000,
            timeout=timeout_ms / 1000,
            failure_mode=mode,
            undo=overrides,
        )

    def needs_approval(self, api_name: str) -> bool:
        return any(self.connector.glob_matches(g, api_name) for g in self.requires_approval)

    def is_retryable(self, call: PreparedCall) -> bool:
        return call.retry_safe and any(self.connector.glob_matches(g, call.api_name) for g in self.retryable)

    def undo_override(self, api_name: str) -> Mapping[str, Any] | None:
        """The caller's undo override for ``api_name``: an exact key first, else the first matching glob."""
        if api_name in self.undo:
            return self.undo[api_name]
        return next((o for g, o in self.undo.items() if fnmatchcase(api_name, g)), None)


def _globs(name: str, globs: Iterable[str]) -> tuple[str, ...]:
    if isinstance(globs, str):
        raise ValidationError(name, "must be a list of globs, not a single string")
    checked = tuple(globs)
    for glob in checked:
        validate_glob(name, glob)
    return checked
