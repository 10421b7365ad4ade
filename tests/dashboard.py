"""Driving the dashboard in tests: as a browser does over plain HTTP (httpx, for what needs no JavaScript),
and a Chromium for Playwright (for what does)."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.cookies import SimpleCookie
from typing import Any

import httpx
from attrs import frozen
from serving import RunningServer, Tenant

from agentrein_core.statuses import UserRole

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PASSWORD = "correct horse battery"
#: What a hostile agent might put in an intent or a payload; the dashboard must show it as text.
HOSTILE = '<script>window.pwned=1</script><img src=x onerror="window.pwned=1"> javascript:alert(1)'
CSRF_FIELD = re.compile(r'name="_csrf_token" value="([^"]+)"')


@frozen
class Account:
    email: str
    password: str
    tenant: Tenant


def account(server: RunningServer, tenant: Tenant, role: UserRole = UserRole.ADMIN) -> Account:
    """A new dashboard user of ``tenant`` (emails are unique across organisations, so each is fresh)."""
    email = f"{role}-{uuid.uuid4().hex[:8]}@example.com"
    server.engine.accounts.create_user(tenant.org_id, email, role, PASSWORD)
    return Account(email, PASSWORD, tenant)


class Visitor:
    """Pages fetched over plain HTTP with cookies kept as Chromium keeps them on 127.0.0.1 (where it sends
    ``Secure`` cookies over http; httpx's cookie jar would not)."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, follow_redirects=False, timeout=30)
        self.cookies: dict[str, str] = {}
        self.csrf = ""

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}))
        if self.cookies:
            headers["cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        response = self.http.request(method, path, headers=headers, **kwargs)
        for raw in response.headers.get_list("set-cookie"):
            for name, morsel in SimpleCookie(raw).items():
                if morsel["max-age"] == "0" or not morsel.value or morsel.value == "null":
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = morsel.value
        found = CSRF_FIELD.search(response.text)
        if found:
            self.csrf = found.group(1)
        return response

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, form: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
        """Post a form as the page would: with the CSRF token the last page carried."""
        return self.request("POST", path, data={"_csrf_token": self.csrf, **(form or {})}, **kwargs)

    def sign_in(self, who: Account) -> httpx.Response:
        self.get("/dashboard/login")
        return self.post("/dashboard/login", {"email": who.email, "password": who.password})

    def close(self) -> None:
        self.http.close()


@contextmanager
def visitor(server: RunningServer, who: Account | None = None) -> Iterator[Visitor]:
    v = Visitor(server.url)
    try:
        if who is not None:
            assert v.sign_in(who).status_code == 303
        yield v
    finally:
        v.close()


def chromium_available() -> bool:
    return os.access(CHROMIUM, os.X_OK)
