"""What the dashboard's forms post (URL-encoded). Every field is text, as a browser sends it; empty means
"not given". The engine validates the values, as it does for the REST API."""

from __future__ import annotations

import msgspec


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


class ConnectorSettings(Form):
    config: str = ""
    credentials: str = ""


class PolicyState(Form):
    enabled: str = ""  # "true" or "false"


class NewApiKey(Form):
    role: str = ""


class NewUser(Form):
    email: str = ""
    role: str = ""
    password: str = ""


def optional(text: str) -> str | None:
    """A form field, or ``None`` when left empty."""
    return text.strip() or None
