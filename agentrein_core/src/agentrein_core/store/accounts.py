"""Who uses AgentRein and how it is set up for them: organisations, API keys, dashboard users, connector
configurations and organisation settings."""

from __future__ import annotations

import sqlalchemy as sa
from attrs import frozen

import agentrein_core.store.schema as schema
from agentrein_core.model import ApiKey, ConnectorConfig, Organisation, OrganisationSettings, User
from agentrein_core.store.rows import Rows


@frozen
class Organisations:
    rows: Rows

    def all(self) -> list[Organisation]:
        t = schema.organisations
        return self.rows.all(Organisation, sa.select(t).order_by(t.c.created_at, t.c.name))

    def get(self, org_id: str) -> Organisation | None:
        return self.rows.one(Organisation, org_id)

    def by_name(self, name: str) -> Organisation | None:
        t = schema.organisations
        return self.rows.first(Organisation, sa.select(t).where(t.c.name == name))

    def lock(self, org_id: str) -> None:
        """Hold the organisation's row until the transaction ends (PostgreSQL; SQLite has one writer)."""
        self.rows.one(Organisation, org_id, lock=True)


@frozen
class ApiKeys:
    rows: Rows

    def by_hash(self, key_hash: str) -> ApiKey | None:
        t = schema.api_keys
        return self.rows.first(ApiKey, sa.select(t).where(t.c.key_hash == key_hash))

    def get(self, org_id: str, key_id: str) -> ApiKey | None:
        t = schema.api_keys
        return self.rows.first(ApiKey, sa.select(t).where(t.c.key_id == key_id, t.c.org_id == org_id))

    def of_org(self, org_id: str) -> list[ApiKey]:
        t = schema.api_keys
        return self.rows.all(ApiKey, sa.select(t).where(t.c.org_id == org_id).order_by(t.c.created_at))


@frozen
class Users:
    """The dashboard's users."""

    rows: Rows

    def get(self, org_id: str, user_id: str) -> User | None:
        return self.rows.one(User, user_id, org_id)

    def by_email(self, email: str) -> User | None:
        t = schema.users
        return self.rows.first(User, sa.select(t).where(t.c.email == email))

    def of_org(self, org_id: str) -> list[User]:
        t = schema.users
        return self.rows.all(User, sa.select(t).where(t.c.org_id == org_id).order_by(t.c.email))

    def delete(self, org_id: str, user_id: str) -> bool:
        t = schema.users
        return self.rows.conn.execute(t.delete().where(t.c.user_id == user_id, t.c.org_id == org_id)).rowcount == 1


@frozen
class ConnectorConfigs:
    """Each organisation's settings and (encrypted) credentials of a connector; written whole with
    :meth:`~agentrein_core.store.rows.Rows.upsert`."""

    rows: Rows

    def get(self, org_id: str, connector: str) -> ConnectorConfig | None:
        t = schema.connector_configs
        return self.rows.first(ConnectorConfig, sa.select(t).where(t.c.org_id == org_id, t.c.connector == connector))

    def of_org(self, org_id: str) -> list[ConnectorConfig]:
        t = schema.connector_configs
        return self.rows.all(ConnectorConfig, sa.select(t).where(t.c.org_id == org_id).order_by(t.c.connector))


@frozen
class Settings:
    """Each organisation's settings; written whole with :meth:`~agentrein_core.store.rows.Rows.upsert`."""

    rows: Rows

    def get(self, org_id: str) -> OrganisationSettings | None:
        t = schema.organisation_settings
        return self.rows.first(OrganisationSettings, sa.select(t).where(t.c.org_id == org_id))
