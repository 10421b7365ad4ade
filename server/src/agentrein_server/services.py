"""What every request handler works with, made once per server process, and the few steps that pair an
engine use case with the server's own follow-up (forgetting a cached key), so that the REST API and the
dashboard take them the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias, TypeVar

from attrs import define
from litestar.datastructures import State
from litestar.di import NamedDependency

from agentrein_core.engine import Engine
from agentrein_core.engine.configuration import Configuration
from agentrein_core.model import ApiKey, Approval
from agentrein_core.plugins import Connectors
from agentrein_core.settings_undo import SettingsUndoExecutor
from agentrein_core.vault import Vault
from agentrein_server.auth import Authenticator, Caller
from agentrein_server.workers import Workers

T = TypeVar("T")


@define
class Services:
    engine: Engine
    connectors: Connectors
    vault: Vault
    workers: Workers
    authenticator: Authenticator
    #: How the server runs undos (the workers' executor): what can stop them is shown before a rollback.
    undo: SettingsUndoExecutor
    #: The settings that hold secrets (connectors', the verifier's key, webhooks'), checked and encrypted.
    configuration: Configuration

    async def writes(self, work: Callable[[], T]) -> T:
        """Run ``work`` (a use case that writes) in this process's one writer, with whatever arrives with it
        (group commit, DESIGN §6): answered once the commit that holds it is durable."""
        return await self.engine.store.group_commit.run(work)

    def decide(self, org_id: str, approval_id: str, reviewer: str, reason: str | None, *, approve: bool) -> Approval:
        """Approve or reject (a decision may start or resume a rollback: its commit wakes the workers)."""
        decide = self.engine.reviews.approve if approve else self.engine.reviews.reject
        return decide(org_id, approval_id, reviewer, reason)

    def revoke_api_key(self, org_id: str, key_id: str) -> ApiKey:
        """The key stops working: at once on this server, within seconds on the others."""
        revoked = self.engine.accounts.revoke_api_key(org_id, key_id)
        self.authenticator.forget(key_id)
        return revoked


def provide_services(state: State) -> Services:
    services: Services = state.services
    return services


#: Handler parameters: the server's services, and who is calling (resolved from the API key).
ServicesDep: TypeAlias = NamedDependency[Services]
CallerDep: TypeAlias = NamedDependency[Caller]
