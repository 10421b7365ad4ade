"""What every request handler works with, made once per server process."""

from __future__ import annotations

from attrs import define
from litestar.datastructures import State

from agentrein_core.engine import Engine
from agentrein_core.plugins import Connectors
from agentrein_server.auth import Authenticator
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
