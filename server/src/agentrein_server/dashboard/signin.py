"""Signing in and out. A password check is deliberately slow (argon2), so they are rationed: failures are
counted per email and address and per address (the attempt is counted before the check, so parallel guesses
gain nothing), and only a few checks run at once, leaving the server's threads to the agents."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Annotated, Any

from litestar import Controller, Request, get, post
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromQuery
from litestar.response import Redirect, Template

from agentrein_core.errors import UnauthorizedError
from agentrein_server.dashboard import forms
from agentrein_server.dashboard.rendering import page, redirect
from agentrein_server.dashboard.viewer import ViewerDep, start_sign_in
from agentrein_server.services import ServicesDep

#: Within ``FAILURE_WINDOW`` seconds, at most this many failed sign-ins for one email from one address, and
#: this many from one address in all; further attempts are refused until the window has passed.
MAX_FAILURES = 5
MAX_FAILURES_PER_ADDRESS = 100
FAILURE_WINDOW = 300.0
#: Password checks running at once (each takes tens of milliseconds of a core and 64 MiB).
MAX_CONCURRENT_CHECKS = 4
HOME = "/dashboard/approvals"


class SignInThrottle:
    """Recent failed sign-ins in this process, by ``email|address`` and by ``address``."""

    def __init__(self) -> None:
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self.checks = threading.BoundedSemaphore(MAX_CONCURRENT_CHECKS)

    def _recent(self, key: str, now: float) -> deque[float]:
        times = self._failures.setdefault(key, deque())
        while times and now - times[0] >= FAILURE_WINDOW:
            times.popleft()
        return times

    def begin(self, email: str, address: str) -> bool:
        """Whether an attempt may be checked; if so it is counted as a failure until :meth:`succeeded`."""
        now = time.monotonic()
        with self._lock:
            if len(self._failures) > 10_000:  # forget keys with nothing recent, so guessing cannot fill memory
                self._failures = {k: t for k, t in self._failures.items() if t and now - t[-1] < FAILURE_WINDOW}
            pair, by_address = self._recent(f"{email}|{address}", now), self._recent(address, now)
            if len(pair) >= MAX_FAILURES or len(by_address) >= MAX_FAILURES_PER_ADDRESS:
                return False
            pair.append(now)
            by_address.append(now)
            return True

    def succeeded(self, email: str, address: str) -> None:
        with self._lock:
            self._failures.pop(f"{email}|{address}", None)
            by_address = self._failures.get(address)
            if by_address:
                by_address.pop()


def safe_next(target: str) -> str:
    """Where to go after signing in: a dashboard page only, never another site (``//evil.example``)."""
    if target.startswith("/dashboard/") and not target.startswith("//") and "\\" not in target:
        return target
    return HOME


class SignInController(Controller):
    path = "/"

    @get("/", sync_to_thread=False)
    def home(self) -> Redirect:
        return Redirect(HOME)

    @get("/login", sync_to_thread=False)
    def form(self, request: Request[Any, Any, Any], next: FromQuery[str] = HOME) -> Template:
        return page(request, "signin.html", None, next=safe_next(next), error=None, email="")

    @post("/login", sync_to_thread=True, status_code=303)
    def sign_in(
        self,
        request: Request[Any, Any, Any],
        services: ServicesDep,
        throttle: NamedDependency[SignInThrottle],
        data: Annotated[forms.SignIn, Body(media_type=RequestEncodingType.URL_ENCODED)],
    ) -> Redirect | Template:
        email = data.email.strip().lower()
        address = request.client.host if request.client else ""
        if not throttle.begin(email, address):
            minutes = int(FAILURE_WINDOW // 60)
            return self._again(request, data, 429, f"Too many failed attempts; wait {minutes} minutes.")
        if not throttle.checks.acquire(timeout=5):
            return self._again(request, data, 503, "Too many sign-ins at once; try again in a moment.")
        try:
            user = services.engine.accounts.sign_in(email, data.password)
        except UnauthorizedError:
            return self._again(request, data, 401, "The email or the password is wrong.")
        finally:
            throttle.checks.release()
        throttle.succeeded(email, address)
        start_sign_in(request, user)
        return Redirect(safe_next(data.next), status_code=303)

    @staticmethod
    def _again(request: Request[Any, Any, Any], data: forms.SignIn, status: int, error: str) -> Template:
        email = data.email.strip()
        return page(
            request, "signin.html", None, status_code=status, next=safe_next(data.next), error=error, email=email
        )

    @post("/logout", sync_to_thread=True, status_code=303)
    def sign_out(self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep) -> Redirect:
        """Signs out everywhere: every sign-in of this user ends, not only this browser's cookie."""
        services.engine.accounts.end_sign_ins(viewer.org_id, viewer.user.user_id)
        request.clear_session()
        return redirect(request, "/dashboard/login")
