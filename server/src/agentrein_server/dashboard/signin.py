"""Signing in and out. A successful sign-in starts a fresh session cookie; repeated failures for one email
from one address are slowed down, so passwords cannot be guessed at speed."""

from __future__ import annotations

import threading
import time
from typing import Annotated, Any

from litestar import Controller, Request, get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromQuery
from litestar.response import Redirect, Template

from agentrein_core.errors import UnauthorizedError
from agentrein_server.dashboard import forms
from agentrein_server.dashboard.rendering import page, redirect
from agentrein_server.services import ServicesDep

#: After this many failed sign-ins for one email from one address within ``FAILURE_WINDOW`` seconds, more
#: attempts are refused until the window has passed.
MAX_FAILURES = 5
FAILURE_WINDOW = 300.0
HOME = "/dashboard/approvals"


class SignInThrottle:
    """Counts recent failed sign-ins per (email, client address), in this process."""

    def __init__(self) -> None:
        self._failures: dict[tuple[str, str], list[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: tuple[str, str], now: float) -> list[float]:
        kept = [t for t in self._failures.get(key, []) if now - t < FAILURE_WINDOW]
        if kept:
            self._failures[key] = kept
        else:
            self._failures.pop(key, None)
        return kept

    def blocked(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return len(self._recent(key, time.monotonic())) >= MAX_FAILURES

    def failed(self, key: tuple[str, str]) -> None:
        with self._lock:
            now = time.monotonic()
            self._failures[key] = [*self._recent(key, now), now]

    def succeeded(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._failures.pop(key, None)


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def cookie_warning(request: Request[Any, Any, Any]) -> str | None:
    """Sign-in cookies are ``Secure``: browsers keep them over HTTPS, and over plain HTTP only on loopback.
    Say so on the sign-in page rather than let a sign-in silently not stick."""
    if request.url.scheme == "https" or (request.url.hostname or "") in LOOPBACK_HOSTS:
        return None
    return (
        "This page came over plain HTTP from another machine, so your browser will not keep the sign-in. "
        "Serve the dashboard over HTTPS (behind a TLS proxy), or open it on 127.0.0.1."
    )


def safe_next(target: str) -> str:
    """Where to go after signing in: a dashboard page only, never another site (``//evil.example``)."""
    if target.startswith("/dashboard/") and not target.startswith("//") and "\\" not in target:
        return target
    return HOME


class SignInController(Controller):
    path = "/"
    throttle = SignInThrottle()

    @get("/", sync_to_thread=False)
    def home(self) -> Redirect:
        return Redirect(HOME)

    @get("/login", sync_to_thread=False)
    def form(self, request: Request[Any, Any, Any], next: FromQuery[str] = HOME) -> Template:
        return page(
            request, "signin.html", None, next=safe_next(next), error=None, email="", warning=cookie_warning(request)
        )

    @post("/login", sync_to_thread=True, status_code=303)
    def sign_in(
        self,
        request: Request[Any, Any, Any],
        services: ServicesDep,
        data: Annotated[forms.SignIn, Body(media_type=RequestEncodingType.URL_ENCODED)],
    ) -> Redirect | Template:
        email = data.email.strip().lower()
        key = (email, request.client.host if request.client else "")
        if self.throttle.blocked(key):
            error, status = f"Too many failed attempts for this email; wait {int(FAILURE_WINDOW // 60)} minutes.", 429
        else:
            try:
                user = services.engine.sign_in(email, data.password)
            except UnauthorizedError:
                self.throttle.failed(key)
                error, status = "The email or the password is wrong.", 401
            else:
                self.throttle.succeeded(key)
                request.clear_session()
                request.set_session({"user_id": user.user_id, "org_id": user.org_id})
                return Redirect(safe_next(data.next), status_code=303)
        return page(
            request,
            "signin.html",
            None,
            status_code=status,
            next=safe_next(data.next),
            error=error,
            email=email,
            warning=cookie_warning(request),
        )

    @post("/logout", sync_to_thread=False, status_code=303)
    def sign_out(self, request: Request[Any, Any, Any]) -> Redirect:
        request.clear_session()
        return redirect(request, "/dashboard/login")
