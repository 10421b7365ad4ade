"""Policies, and the organisation's policy version that every change to them bumps."""

from __future__ import annotations

import sqlalchemy as sa
from attrs import frozen

import agentrein_core.store.schema as schema
from agentrein_core.model import Policy
from agentrein_core.store.rows import Rows

_T, _O = schema.policies, schema.organisations


@frozen
class Policies:
    rows: Rows

    def get(self, org_id: str, policy_id: str) -> Policy | None:
        return self.rows.one(Policy, policy_id, org_id)

    def enabled(self, org_id: str) -> list[Policy]:
        # Read once per policy version (the engine keeps them), not once per call.
        stmt = sa.select(_T).where(_T.c.org_id == org_id, _T.c.enabled.is_(True)).order_by(_T.c.created_at)
        return self.rows.all(Policy, stmt)

    def bump_version(self, org_id: str) -> None:
        self.rows.conn.execute(_O.update().where(_O.c.org_id == org_id).values(policy_version=_O.c.policy_version + 1))

    def of_org(self, org_id: str) -> list[Policy]:
        return self.rows.all(Policy, sa.select(_T).where(_T.c.org_id == org_id).order_by(_T.c.created_at))

    def delete(self, org_id: str, policy_id: str) -> bool:
        stmt = _T.delete().where(_T.c.policy_id == policy_id, _T.c.org_id == org_id)
        return self.rows.conn.execute(stmt).rowcount == 1
