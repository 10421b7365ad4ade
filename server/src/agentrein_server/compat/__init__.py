"""The compatible API (``/compat``): the wire of the hosted product's published SDKs (PyPI ``agentrein`` 0.1.x,
npm ``agentrein`` 1.0.x; contract/compat/WIRE.md), served beside the native API on the same engine. Every route
is a translation onto the engine's use cases; its callers are agent keys, through signed tokens
(:mod:`~agentrein_server.compat.tokens`)."""

from __future__ import annotations

from litestar import Router
from litestar.di import Provide

from agentrein_server.compat.routes import CompatController
from agentrein_server.compat.tokens import provide_compat_caller

#: Where the compatible API is served: their SDKs take ``server_url="http://host:8000/compat"``.
PREFIX = "/compat"


def compat_router() -> Router:
    """The ``/compat`` routes; ``caller`` there is the agent key a token names, never an API key sent as is.
    Left out of the OpenAPI document, which types the native API: their wire is contract/compat/WIRE.md."""
    return Router(
        PREFIX,
        route_handlers=[CompatController],
        include_in_schema=False,
        dependencies={"caller": Provide(provide_compat_caller, sync_to_thread=True)},
    )
