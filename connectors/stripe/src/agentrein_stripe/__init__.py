"""AgentRein's connector for Stripe (``wrap(stripe.StripeClient(...), session, connector="stripe")``).

Registered through the ``agentrein`` entry-point group, exactly as a third party's connector would be.
"""

from __future__ import annotations

from agentrein_core.connector import Connector, hookimpl
from agentrein_stripe.connector import StripeConnector

__all__ = ["StripeConnector"]


@hookimpl
def agentrein_register_connectors() -> list[Connector]:
    return [StripeConnector()]
