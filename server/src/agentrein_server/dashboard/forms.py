"""What the dashboard's forms post (URL-encoded). Every field is text, as a browser sends it; empty means
"not given". The engine validates the values, as it does for the REST API."""

from __future__ import annotations

import math

import msgspec

from agentrein_core.errors import ValidationError


class Form(msgspec.Struct, kw_only=True):
    _csrf_token: str = ""  # checked by the CSRF middleware before the handler runs


class SignIn(Form):
    email: str = ""
    password: str = ""
    next: str = ""


class Decision(Form):
    reason: str = ""


class NewPolicy(Form):
    name: str = ""
    effect: str = ""
    connector: str = ""
    api_name: str = ""
    agent_id: str = ""
    operation_type: str = ""
    before_execution: str = ""  # "on" when the box is ticked
    timeout_minutes: str = ""  # empty: the agent's own approval timeout


class PolicyState(Form):
    enabled: str = ""  # "true" or "false"


class NewApiKey(Form):
    role: str = ""


class Settings(Form):
    on_drift: str = ""
    verifier_url: str = ""
    verifier_model: str = ""
    verifier_api_key: str = ""  # empty keeps the stored key
    forget_verifier_api_key: str = ""  # "on" when the box is ticked
    webhook_hosts: str = ""  # one per line


class NewWebhook(Form):
    url: str = ""
    events: list[str] | str = ""  # a form sends one ticked box as a plain value, several as a list
    format: str = "json"
    secret: str = ""


class NewUser(Form):
    email: str = ""
    role: str = ""
    password: str = ""


def several(value: list[str] | str) -> list[str]:
    """The values of a group of check boxes (none, one or several ticked)."""
    if isinstance(value, str):
        return [value] if value else []
    return value


def minutes_in_ms(field: str, text: str) -> int | None:
    """A number of minutes typed in a form, in milliseconds; ``None`` when left empty."""
    if not text.strip():
        return None
    try:
        minutes = float(text)
    except ValueError:
        raise ValidationError(field, f"{text!r} is not a number of minutes") from None
    if not math.isfinite(minutes) or minutes <= 0:
        raise ValidationError(field, "must be a positive number of minutes")
    return round(minutes * 60_000)


def optional(text: str) -> str | None:
    """A form field, or ``None`` when left empty."""
    return text.strip() or None
