"""The dashboard as one Litestar router: its middleware (session cookie, CSRF, security headers), the page
controllers of every area, the static files, and the error pages."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode, urlsplit

from litestar import Request, Response, Router, get
from litestar.config.csrf import CSRFConfig
from litestar.di import Provide
from litestar.exceptions import HTTPException
from litestar.middleware import DefineMiddleware
from litestar.middleware.csrf import CSRFMiddleware
from litestar.middleware.session import SessionMiddleware
from litestar.middleware.session.client_side import ClientSideSessionBackend, CookieBackendConfig
from litestar.response import Redirect, Template
from litestar.static_files import create_static_files_router
from litestar.types import ASGIApp

from agentrein_core.errors import AgentReinError
from agentrein_core.vault import Vault
from agentrein_server.dashboard.admin import (
    ConnectorPages,
    KeyPages,
    PolicyPages,
    SettingsPages,
    UserPages,
    WebhookPages,
)
from agentrein_server.dashboard.approvals import ApprovalPages
from agentrein_server.dashboard.rendering import STATIC
from agentrein_server.dashboard.sessions import SessionPages
from agentrein_server.dashboard.signin import SignInController, SignInThrottle
from agentrein_server.dashboard.viewer import SIGNED_IN_SECONDS, SignInRequired, provide_member, provide_viewer

log = logging.getLogger("agentrein.server")

PREFIX = "/dashboard"
SESSION_COOKIE = "__Host-agentrein-session"
CSRF_COOKIE = "__Host-agentrein-csrf"
SECURITY_HEADERS = {
    # Only our own files run, style and load; nothing an agent wrote can become a script or a frame.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


@get("/", include_in_schema=False, sync_to_thread=False)
def root() -> Redirect:
    """The server's root URL opens the dashboard."""
    return Redirect(f"{PREFIX}/approvals")


def dashboard_router(vault: Vault) -> Router:
    """The dashboard's routes, with their cookies' secrets derived from the server's secret key (so that
    every replica accepts every other's sign-ins)."""
    # "__Host-" cookies are Secure, for this host only and path "/": no sibling subdomain can plant one (a
    # planted CSRF cookie would pair with a token of its own). Lax, so a link from chat or mail keeps both.
    session_cookie = CookieBackendConfig(
        secret=vault.derive("dashboard session"),
        key=SESSION_COOKIE,
        path="/",
        max_age=SIGNED_IN_SECONDS,
        secure=True,
        httponly=True,
        samesite="lax",
    )
    csrf = CSRFConfig(
        secret=vault.derive("dashboard csrf").hex(),
        cookie_name=CSRF_COOKIE,
        cookie_path="/",
        cookie_secure=True,
        cookie_httponly=True,
        cookie_samesite="lax",
    )
    throttle = SignInThrottle()  # one per app: failed sign-ins are counted per server process
    return Router(
        path=PREFIX,
        route_handlers=[
            SignInController,
            ApprovalPages,
            SessionPages,
            PolicyPages,
            ConnectorPages,
            KeyPages,
            UserPages,
            SettingsPages,
            WebhookPages,
            create_static_files_router(path="/static", directories=[STATIC]),
        ],
        dependencies={
            "throttle": Provide(lambda: throttle, sync_to_thread=False, use_cache=True),
            "signed_in": Provide(provide_viewer, sync_to_thread=True),
            "viewer": Provide(provide_member, sync_to_thread=False),
        },
        middleware=[DefineMiddleware(_sessions, config=session_cookie), DefineMiddleware(CSRFMiddleware, config=csrf)],
        response_headers=SECURITY_HEADERS,
        exception_handlers={
            SignInRequired: _sign_in_first,
            AgentReinError: error_page,
            HTTPException: error_page,
            Exception: error_page,
        },
        include_in_schema=False,
    )


def _sessions(app: ASGIApp, config: CookieBackendConfig) -> ASGIApp:
    """The session middleware, built when the app is (Litestar copies a router's middleware definitions, and
    the cookie backend's cipher cannot be copied)."""
    return SessionMiddleware(app, backend=ClientSideSessionBackend(config=config))


def _sign_in_first(request: Request[Any, Any, Any], _: SignInRequired) -> Response[Any]:
    if request.headers.get("hx-request") == "true":  # a live fragment: send the whole page to sign-in
        return Response(None, status_code=401, headers={**SECURITY_HEADERS, "HX-Redirect": f"{PREFIX}/login"})
    if request.method == "GET":
        back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    else:  # a form posted after the sign-in ended: come back to the page it was on, not to its POST-only URL
        back = urlsplit(request.headers.get("referer", "")).path
    return Redirect(f"{PREFIX}/login?{urlencode({'next': back})}", status_code=303, headers=SECURITY_HEADERS)


def is_dashboard(request: Request[Any, Any, Any]) -> bool:
    """Whether a request was for a dashboard page (errors are then pages, not problem+json)."""
    return request.url.path == PREFIX or request.url.path.startswith(PREFIX + "/")


def error_page(request: Request[Any, Any, Any], exc: Exception) -> Template:
    """An error as a page (or, for htmx, a message in the page's message area)."""
    status, detail = 500, "Something went wrong on our side; the server has logged it."
    if isinstance(exc, AgentReinError):
        status = exc.status
        detail = str(exc) if status < 500 else detail
    elif isinstance(exc, HTTPException):
        status = exc.status_code
        detail = exc.detail if status < 500 else detail
        if "CSRF" in detail:
            detail = "This form had expired or came from another site. Reload the page and try again."
    if status >= 500:
        log.error("dashboard error on %s %s", request.method, request.url.path, exc_info=exc)
    if request.headers.get("hx-request") == "true":  # shown in the page's message area
        headers = {**SECURITY_HEADERS, "HX-Retarget": "#messages", "HX-Reswap": "innerHTML"}
        return Template("message.html", context={"detail": detail}, status_code=status, headers=headers)
    context = {"viewer": None, "flash": None, "status": status, "detail": detail}
    # Handlers' answers get the router's headers; an error's answer does not, so it carries them itself.
    return Template("error.html", context=context, status_code=status, headers=SECURITY_HEADERS)
