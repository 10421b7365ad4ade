"""The engine: AgentRein's use cases, one module per area, behind the :class:`Engine` façade.

Dependencies inside point one way: :mod:`.validation`, :mod:`.records` (lookups, guarded writes, read
models) and :mod:`.consequences` (what one use case causes in another area) are used by the area modules,
and :mod:`.facade` gathers the areas. No module here imports this package's ``__init__``.
"""

from __future__ import annotations

from agentrein_core.commands import DEFAULT_APPROVAL_TIMEOUT
from agentrein_core.engine.accounts import API_KEY_PREFIX
from agentrein_core.engine.consequences import SYSTEM
from agentrein_core.engine.facade import Engine
from agentrein_core.engine.maintenance import MaintenanceReport
from agentrein_core.engine.rollbacks import ROLLBACK_LEASE
from agentrein_core.model import DEFAULT_ORGANISATION
from agentrein_core.read_models import LoggedAction

__all__ = [
    "API_KEY_PREFIX",
    "DEFAULT_APPROVAL_TIMEOUT",
    "DEFAULT_ORGANISATION",
    "ROLLBACK_LEASE",
    "SYSTEM",
    "Engine",
    "LoggedAction",
    "MaintenanceReport",
]
