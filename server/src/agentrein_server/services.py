"""What every request handler works with, made once per server process."""

from __future__ import annotations

from typing import TypeAlias

from attrs import define
from litestar.datastructures import State
from litestar.di import NamedDependency

from agentrein_core.engine import Engine
from agentrein_core.plugins import Connectors
from agentrein_server.auth import Authenticator, Caller
from agentrein_server.vault import Vault
from agentrein_server.workers import Workers


@define
class Services:
    engine: Engine
    connectors: Connectors
    vault: Vault
    workers: Workers
    authenticator: Authenticator


def provide_services(state: State) -> Services:
    services: Services = state.services
    return services


#: Handler parameters: the server's services, and who is calling (resolved from the API key).
ServicesDep: TypeAlias = NamedDependency[Services]
CallerDep: TypeAlias = NamedDependency[Caller]
