"""The REST API's documentation: the OpenAPI document at ``/schema/openapi.json`` and Swagger UI at ``/schema``,
whose script and style the server serves itself (``/schema/assets``), so the page works offline.

Swagger UI is vendored unchanged from the npm package ``swagger-ui-dist`` 5.35.0 in ``swagger-ui-5.35.0/``:
Apache-2.0, its ``LICENSE`` and ``NOTICE`` beside it, and the licences of what its bundles include in the
``*.LICENSE.txt`` files. To upgrade, replace the folder with the new package's files of the same names.
"""

from __future__ import annotations

from pathlib import Path

from litestar import Router
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityRequirement, SecurityScheme
from litestar.plugins import PluginProtocol
from litestar.static_files import create_static_files_router

from agentrein_server.api.answers import AnswerSchemas
from agentrein_server.api.bodies import ClosedBodies

SWAGGER_UI = Path(__file__).parent / "swagger-ui-5.35.0"
ASSETS = "/schema/assets"
#: What every operation of the API needs (``/healthz`` and ``/metrics`` say their own).
API_KEY: list[SecurityRequirement] = [{"apiKey": []}]
#: How the document is made from the handlers: answers by their models, bodies closed to unknown fields.
SCHEMA_PLUGINS: list[PluginProtocol] = [AnswerSchemas(), ClosedBodies()]


def openapi_config() -> OpenAPIConfig:
    return OpenAPIConfig(
        title="AgentRein",
        version="0.1.0",
        description="Record, review and roll back what AI agents do through real APIs.",
        path="/schema",
        render_plugins=[
            SwaggerRenderPlugin(
                js_url=f"{ASSETS}/swagger-ui-bundle.js",
                css_url=f"{ASSETS}/swagger-ui.css",
                standalone_preset_js_url=f"{ASSETS}/swagger-ui-standalone-preset.js",
                favicon=f"<link rel='icon' type='image/png' href='{ASSETS}/favicon-32x32.png'>",
            )
        ],
        components=Components(
            security_schemes={
                "apiKey": SecurityScheme(type="http", scheme="bearer"),
                "metricsToken": SecurityScheme(
                    type="http", scheme="bearer", description="$AGENTREIN_METRICS_TOKEN (unset: loopback only)"
                ),
            }
        ),
    )


def assets() -> Router:
    """Swagger UI's files, at ``/schema/assets``."""
    return create_static_files_router(path=ASSETS, directories=[SWAGGER_UI], include_in_schema=False)
