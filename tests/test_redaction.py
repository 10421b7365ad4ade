"""What never reaches the store: secrets by key, card numbers by shape, passwords in URLs."""

from __future__ import annotations

import httpx

from agentrein_core.redaction import REDACTED, Redactor
from agentrein_http import HttpConnector


def test_keys_naming_secrets_are_redacted_whatever_their_spelling() -> None:
    redacted = Redactor().redact(
        {
            "Password": "a",
            "X-Api-Key": "b",
            "client_secret": "c",
            "accessToken": "d",
            "pwd": "e",
            "AWS_ACCESS_KEY_ID": "f",
            "email": "kept@example.com",
            "amount": 12,
        }
    )
    assert redacted == {
        "Password": REDACTED,
        "X-Api-Key": REDACTED,
        "client_secret": REDACTED,
        "accessToken": REDACTED,
        "pwd": REDACTED,
        "AWS_ACCESS_KEY_ID": REDACTED,
        "email": "kept@example.com",
        "amount": 12,
    }


def test_card_numbers_are_redacted_anywhere_as_text_or_number() -> None:
    redacted = Redactor().redact({"note": ["4242424242424242", 4000056655665556, "4242-4242-4242-4241", 1234]})
    assert redacted == {"note": [REDACTED, REDACTED, "4242-4242-4242-4241", 1234]}  # the third fails Luhn


def test_a_connector_adds_its_own_sensitive_fields() -> None:
    assert Redactor({"routing_number"}).redact({"routing-number": "110000000"}) == {"routing-number": REDACTED}


def test_a_password_in_a_url_is_not_recorded() -> None:
    call = HttpConnector().prepare(httpx.Client(), ("post",), ("https://bob:hunter2@api.test/v1/x?token=t",), {})
    assert call is not None
    assert "hunter2" not in call.payload["url"]
    assert Redactor().redact(call.payload)["query"] == {"token": REDACTED}
