"""The unit of work: :class:`Tx`, what one transaction reads and writes, composed of one object per aggregate
(``tx.sessions``, ``tx.approvals`` …) over the shared :class:`~.rows.Rows`."""

from __future__ import annotations

from functools import cached_property

from agentrein_core.store.accounts import ApiKeys, ConnectorConfigs, Organisations, Settings, Users
from agentrein_core.store.approvals import Approvals
from agentrein_core.store.before_states import BeforeStates
from agentrein_core.store.outbox import Deliveries, Events, Verifications, Webhooks
from agentrein_core.store.policies import Policies
from agentrein_core.store.rollbacks import Rollbacks
from agentrein_core.store.rows import Rows
from agentrein_core.store.sessions import Actions, Sessions


class Tx(Rows):
    """Reads and writes inside one transaction. Every read is scoped to an organisation by its caller. Each
    aggregate is made when first used, so a transaction pays only for those it reads."""

    @cached_property
    def organisations(self) -> Organisations:
        return Organisations(self)

    @cached_property
    def api_keys(self) -> ApiKeys:
        return ApiKeys(self)

    @cached_property
    def users(self) -> Users:
        return Users(self)

    @cached_property
    def connector_configs(self) -> ConnectorConfigs:
        return ConnectorConfigs(self)

    @cached_property
    def settings(self) -> Settings:
        return Settings(self)

    @cached_property
    def sessions(self) -> Sessions:
        return Sessions(self)

    @cached_property
    def actions(self) -> Actions:
        return Actions(self)

    @cached_property
    def approvals(self) -> Approvals:
        return Approvals(self)

    @cached_property
    def policies(self) -> Policies:
        return Policies(self)

    @cached_property
    def rollbacks(self) -> Rollbacks:
        return Rollbacks(self)

    @cached_property
    def verifications(self) -> Verifications:
        return Verifications(self)

    @cached_property
    def webhooks(self) -> Webhooks:
        return Webhooks(self)

    @cached_property
    def deliveries(self) -> Deliveries:
        return Deliveries(self)

    @cached_property
    def events(self) -> Events:
        return Events(self)

    @cached_property
    def before_states(self) -> BeforeStates:
        return BeforeStates(self)
