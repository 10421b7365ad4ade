"""How the dashboard's pages are rendered: the Jinja2 environment (autoescaping every value, so an agent's
payload is shown as text and never run) and the filters the templates use to show times, JSON and statuses."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from litestar import Request
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect, Template
from litestar.template.config import TemplateConfig

from agentrein_core import wording as words
from agentrein_core.errors import AgentReinError
from agentrein_core.wording import duration
from agentrein_server.dashboard.viewer import Viewer

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

#: The colour family of each status (text always names the status too: colour is never the only signal).
TONE = {
    "good": {"SUCCESS", "APPROVED", "DONE", "COMPLETED", "REVERTED", "SUCCEEDED", "VERIFIED", "ALLOW", "DELIVERED"},
    "bad": {
        "FAILED",
        "REJECTED",
        "ROLLBACK_FAILED",
        "BLOCK",
        "DECLINED",
        "PARTIALLY_REVERTED",
        "DRIFT_DETECTED",
    },
    "wait": {
        "PENDING",
        "PENDING_APPROVAL",
        "AWAITING_APPROVAL",
        "WAITING_APPROVAL",
        "IN_PROGRESS",
        "ROLLING_BACK",
        "RUNNING",
        "REQUIRE_APPROVAL",
        "CLEARED",
    },
}


def when(moment: datetime | None) -> str:
    """A time as people read it, in UTC (the ``<time>`` element carries the exact value)."""
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "—"


def pretty(value: Any) -> str:
    """JSON laid out for reading, keys sorted; escaped by the template like any other text. Laid out by msgspec
    (a session page shows each action's payload, answer and undo: ``json.dumps`` with an indent is its pure
    Python encoder, ten times slower), as ``json.dumps`` lays it out but for floats' exponents (``1e16``, not
    ``1e+16``) and NaN (``null``); by ``json.dumps`` for what msgspec cannot encode."""
    try:
        return msgspec.json.format(msgspec.json.encode(value, order="sorted"), indent=2).decode()
    except (TypeError, msgspec.EncodeError):
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def tone(status: object) -> str:
    text = str(status)
    return next((name for name, members in TONE.items() if text in members), "plain")


def ago(moment: datetime) -> str:
    """How long before now ``moment`` was, in whole minutes (``3 minutes ago``)."""
    minutes = int((datetime.now(UTC) - moment).total_seconds() // 60)
    if minutes < 1:
        return "less than a minute ago"
    return "1 minute ago" if minutes == 1 else f"{minutes} minutes ago"


def fingerprint(*parts: object) -> str:
    """A short digest of what a live part of a page shows: its poll answers 204 while this is unchanged, so
    the page (a reason being typed, an open detail) is left alone."""
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,  # a misspelt name fails the page in tests instead of rendering blank
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(when=when, pretty=pretty, tone=tone, duration=duration, ago=ago)
    environment.globals["words"] = words
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(environment))


def page(
    request: Request[Any, Any, Any], template: str, viewer: Viewer | None, *, status_code: int = 200, **context: Any
) -> Template:
    """A whole page: ``template`` with the signed-in viewer and the message left by the last form, if any."""
    message = request.session.pop("flash", None) if viewer is not None else None
    return Template(template, context={"viewer": viewer, "flash": message, **context}, status_code=status_code)


def refused(template: str, viewer: Viewer, err: AgentReinError, message: str, **context: Any) -> Template:
    """A form's page again after its submit was refused: the reason at the top, with the error's status, and
    the form filled with what was typed (``context``; never a password or a secret, which are typed again)."""
    flash = {"text": message, "error": True}
    return Template(template, context={"viewer": viewer, "flash": flash, **context}, status_code=err.status)


def fragment(template: str, **context: Any) -> Template:
    """Part of a page, for htmx to swap in."""
    return Template(template, context=context)


def redirect(request: Request[Any, Any, Any], to: str, message: str | None = None, *, error: bool = False) -> Redirect:
    """After a form: back to a page (303, so a reload does not post again), with a message shown there once."""
    if message:
        request.session["flash"] = {"text": message, "error": error}
    return Redirect(to, status_code=303)
