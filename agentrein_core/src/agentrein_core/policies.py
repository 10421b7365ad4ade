"""Organisation policies: validation of a rule's globs, and which effect applies to an action.

A policy matches an action when every glob it sets matches (``fnmatch``, case-sensitive); unset fields match
anything. Among enabled matches the strictest wins: ``BLOCK`` > ``REQUIRE_APPROVAL`` before execution (the
call waits for a reviewer) > ``REQUIRE_APPROVAL`` after execution (the call runs, a reviewer looks afterwards)
> ``ALLOW``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

from attrs import frozen

from agentrein_core.errors import ValidationError
from agentrein_core.model import Policy
from agentrein_core.statuses import OperationType, PolicyEffect

STRICTNESS = {PolicyEffect.ALLOW: 0, PolicyEffect.REQUIRE_APPROVAL: 1, PolicyEffect.BLOCK: 3}

#: The action fields a policy can match, in the order they are documented.
MATCH_FIELDS = ("connector", "api_name", "agent_id", "operation_type")


@frozen
class Subject:
    """What a policy is matched against: the facts of one action."""

    connector: str
    api_name: str
    agent_id: str
    operation_type: OperationType


@frozen
class Decision:
    effect: PolicyEffect
    policy: Policy | None  # the deciding policy; None when nothing matched (ALLOW)

    @property
    def holds(self) -> bool:
        """Whether the call must wait for a reviewer's approval before it runs."""
        return self.policy is not None and self.effect is PolicyEffect.REQUIRE_APPROVAL and self.policy.before_execution


def strictness(policy: Policy) -> int:
    """How strict a policy is; holding a call before it runs is stricter than reviewing it afterwards."""
    return STRICTNESS[policy.effect] + (1 if policy.before_execution else 0)


def describe(policy: Policy) -> str:
    """What a policy does to a matching call, in words (every page and command that shows a policy says it)."""
    if policy.effect is PolicyEffect.BLOCK:
        return "blocks the call: it never runs"
    if policy.effect is PolicyEffect.ALLOW:
        return "allows the call"
    if policy.before_execution:
        wait = f", for {_duration(policy.approval_timeout_ms)}" if policy.approval_timeout_ms else ""
        return f"holds the call until a reviewer approves it (the agent waits{wait})"
    return "lets the call run, then asks a reviewer to look at it (a rejection undoes it)"


def review_timing(policy: Policy) -> str:
    """When a ``REQUIRE_APPROVAL`` policy has a reviewer look at a call, in a few words ("" for other effects)."""
    if policy.effect is not PolicyEffect.REQUIRE_APPROVAL:
        return ""
    return "before it runs" if policy.before_execution else "after it ran"


def _duration(ms: int) -> str:
    seconds = ms / 1000
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} seconds"


def parse_effect(value: str) -> PolicyEffect:
    try:
        return PolicyEffect(value)
    except ValueError:
        allowed = ", ".join(e.value for e in PolicyEffect)
        raise ValidationError("effect", f"{value!r} is not a policy effect (use one of {allowed})") from None


def validate_glob(field_name: str, glob: str | None) -> str | None:
    """Check one match glob: a non-empty string whose ``[...]`` sets are closed; for ``operation_type``,
    one that can match at least one operation type."""
    if glob is None:
        return None
    if not isinstance(glob, str) or not glob.strip():
        raise ValidationError(field_name, "a glob must be a non-empty string (leave it out to match anything)")
    longest = 500 if field_name == "api_name" else 200
    if len(glob) > longest or "\x00" in glob:
        raise ValidationError(field_name, f"a glob must be at most {longest} characters, with no NUL")
    if _has_unclosed_set(glob):
        raise ValidationError(field_name, f"{glob!r} has a '[' with no closing ']'")
    if field_name == "operation_type" and not any(fnmatchcase(t.value, glob) for t in OperationType):
        listed = ", ".join(t.value for t in OperationType)
        raise ValidationError(field_name, f"{glob!r} matches no operation type ({listed})")
    return glob


def _has_unclosed_set(glob: str) -> bool:
    without_sets = re.sub(r"\[!?\]?[^\]]*\]", "", glob)
    return "[" in without_sets


def matches(policy: Policy, subject: Subject) -> bool:
    for name in MATCH_FIELDS:
        glob = getattr(policy, name)
        if glob is not None and not fnmatchcase(str(getattr(subject, name)), glob):
            return False
    return True


def decide(policies: Iterable[Policy], subject: Subject) -> Decision:
    """The strictest effect among the enabled policies that match ``subject`` (ALLOW when none match)."""
    best = Decision(PolicyEffect.ALLOW, None)
    for policy in policies:
        stricter = best.policy is None or strictness(policy) > strictness(best.policy)
        if policy.enabled and stricter and matches(policy, subject):
            best = Decision(policy.effect, policy)
    return best
