"""Use cases of the organisation's policies: the rules that allow, hold for review, or block an agent's
calls (matched and ranked by :mod:`agentrein_core.policies`)."""

from __future__ import annotations

from datetime import timedelta

from attrs import evolve

import agentrein_core.engine.validation as validation
from agentrein_core.commands import NewPolicy
from agentrein_core.engine.base import UseCases
from agentrein_core.engine.consequences import NO_GATES_REASON
from agentrein_core.errors import NotFoundError, ValidationError
from agentrein_core.ids import new_id
from agentrein_core.model import Action, Policy
from agentrein_core.policies import Subject, matches, parse_effect, validate_glob
from agentrein_core.redaction import Redactor
from agentrein_core.statuses import Plan, PolicyEffect


class PolicyRules(UseCases):
    def add_policy(self, org_id: str, new: NewPolicy) -> Policy:
        """A new rule (:class:`~agentrein_core.commands.NewPolicy` says what its fields mean). Its name and
        globs are stored redacted, the globs as the api names and agent ids they match are."""
        redactor = self.redactors.common
        policy = Policy(
            policy_id=new_id("pol"),
            org_id=org_id,
            name=validation.redacted_text("name", new.name, 200, redactor),
            effect=parse_effect(new.effect),
            enabled=validation.boolean("enabled", new.enabled),
            created_at=self.clock(),
            connector=validate_glob("connector", new.connector),
            api_name=_redacted_glob("api_name", new.api_name, redactor),
            agent_id=_redacted_glob("agent_id", new.agent_id, redactor),
            operation_type=validate_glob("operation_type", new.operation_type),
            before_execution=validation.boolean("before_execution", new.before_execution),
            approval_timeout_ms=new.approval_timeout_ms,
        )
        _check_holding(policy)
        with self.store.transaction() as tx:
            org = tx.organisations.get(org_id)
            if policy.before_execution and org is not None and org.plan is Plan.FREE:
                raise ValidationError("before_execution", NO_GATES_REASON)
            if any(p.name == policy.name for p in tx.policies.of_org(org_id)):
                raise ValidationError("name", f"a policy named {policy.name!r} already exists")
            tx.insert(policy)
            tx.policies.bump_version(org_id)
        return policy

    def list_policies(self, org_id: str) -> list[Policy]:
        with self.store.transaction(write=False) as tx:
            return tx.policies.of_org(org_id)

    def set_policy_enabled(self, org_id: str, policy_id: str, enabled: bool) -> Policy:
        with self.store.transaction() as tx:
            policy = tx.policies.get(org_id, policy_id)
            if policy is None:
                raise NotFoundError("policy", policy_id)
            changed = evolve(policy, enabled=validation.boolean("enabled", enabled))
            tx.replace(changed)
            tx.policies.bump_version(org_id)
            return changed

    def delete_policy(self, org_id: str, policy_id: str) -> None:
        with self.store.transaction() as tx:
            if not tx.policies.delete(org_id, policy_id):
                raise NotFoundError("policy", policy_id)
            tx.policies.bump_version(org_id)

    def preview_policy(
        self,
        org_id: str,
        *,
        connector: str | None = None,
        api_name: str | None = None,
        agent_id: str | None = None,
        operation_type: str | None = None,
        recent: int = 200,
    ) -> list[Action]:
        """Which of the organisation's latest ``recent`` actions a policy with these globs would have
        matched, newest first: a rule can be tried before it is saved."""
        rule = Policy(
            policy_id="preview",
            org_id=org_id,
            name="preview",
            effect=PolicyEffect.BLOCK,
            enabled=True,
            created_at=self.clock(),
            connector=validate_glob("connector", connector),
            api_name=_redacted_glob("api_name", api_name, self.redactors.common),
            agent_id=_redacted_glob("agent_id", agent_id, self.redactors.common),
            operation_type=validate_glob("operation_type", operation_type),
        )
        with self.store.transaction(write=False) as tx:
            found = tx.actions.recent(org_id, recent)
        return [
            action
            for action, agent in found
            if matches(rule, Subject(action.connector, action.api_name, agent, action.operation_type))
        ]


def _redacted_glob(field: str, glob: str | None, redactor: Redactor) -> str | None:
    """A valid glob, redacted as the text it matches is (:meth:`Redactor.redact_glob`), and still valid (the
    marker may make it longer than it may be)."""
    return validate_glob(field, redactor.redact_glob(validate_glob(field, glob)))


def _check_holding(policy: Policy) -> None:
    if policy.before_execution and policy.effect is not PolicyEffect.REQUIRE_APPROVAL:
        raise ValidationError("before_execution", "only a REQUIRE_APPROVAL policy can hold a call before it runs")
    if policy.approval_timeout_ms is None:
        return
    if not policy.before_execution:
        raise ValidationError(
            "approval_timeout_ms", "only a policy that holds calls before they run (before_execution) has a timeout"
        )
    if isinstance(policy.approval_timeout_ms, bool) or not isinstance(policy.approval_timeout_ms, int):
        raise ValidationError("approval_timeout_ms", "must be a whole number of milliseconds")
    validation.approval_timeout(timedelta(milliseconds=policy.approval_timeout_ms), "approval_timeout_ms")
