"""Before-states: objects as the server read them just before a call changed them (the published SDKs'
precapture, through ``/compat``)."""

from __future__ import annotations

import sqlalchemy as sa
from attrs import frozen

import agentrein_core.store.schema as schema
from agentrein_core.model import BeforeState
from agentrein_core.store.rows import Rows

_T = schema.before_states


@frozen
class BeforeStates:
    rows: Rows

    def get(self, org_id: str, precapture_id: str) -> BeforeState | None:
        return self.rows.one(BeforeState, precapture_id, org_id)

    def of_action(self, org_id: str, action_id: str) -> BeforeState | None:
        """The before-state read for a held call (its ``action_id``)."""
        stmt = sa.select(_T).where(_T.c.org_id == org_id, _T.c.action_id == action_id).limit(1)
        return self.rows.first(BeforeState, stmt)
