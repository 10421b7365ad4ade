"""The reviewer dashboard: server-rendered pages under ``/dashboard`` (Jinja2 templates, htmx for the live
parts, no build step), calling the same :class:`~agentrein_core.engine.Engine` use cases as the REST API.

Layers, outermost first: the session cookie (encrypted, HttpOnly, Secure, SameSite) and CSRF check on every
form (Litestar's middleware), security headers (a strict Content-Security-Policy: only our own scripts run),
who is signed in (:mod:`.viewer`), then one module per area: :mod:`.signin`, :mod:`.approvals`,
:mod:`.sessions` and the admin pages in :mod:`.admin`; :mod:`.router` puts them together.
"""
