"""Policies, and the organisation's policy version that every change to them bumps."""

from __future__ import annotations

import sqlalchemy as sa
from attrs import frozen

from agentrein_core import schema
from agentrein_core.model import Policy
from agentrein_core.store.prepared import Prepared
from agentrein_core.store.rows import Rows

_T, _O = schema.policies, schema.organisations
_ENABLED = Prepared(
    sa.select(_T).where(_T.c.org_id == sa.bindparam("org"), _T.c.enabled.is_(True)).order_by(_T.c.created_at)
)
_BUMP_VERSION = Prepared(
    _O.update().where(_O.c.org_id == sa.bindparam("org")).values(policy_version=_O.c.policy_version + 1)
)


@frozen
class Policies:
    rows: Rows

    def get(self, org_id: str, policy_id: str) -> Policy | None:
        return self.rows.one(Policy, policy_id, org_id)

    def enabled(self, org_id: str) -> list[Policy]:
        return self.rows.prepared(Policy, _ENABLED, {"org": org_id})

    def bump_version(self, org_id: str) -> None:
        _BUMP_VERSION.run(self.rows.conn, {"org": org_id})

    def of_org(self, org_id: str) -> list[Policy]:
        return self.rows.all(Policy, sa.select(_T).where(_T.c.org_id == org_id).order_by(_T.c.created_at))

    def delete(self, org_id: str, policy_id: str) -> bool:
        stmt = _T.delete().where(_T.c.policy_id == policy_id, _T.c.org_id == org_id)
        return self.rows.conn.execute(stmt).rowcount == 1
