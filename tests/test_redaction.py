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


def test_secrets_in_plain_text_and_form_bodies_are_not_recorded() -> None:
    client = httpx.Client()
    text = "pay with 4242 4242 4242 4242, password=t-secret"
    plain = HttpConnector().prepare(client, ("post",), ("https://api.test/v1/x",), {"content": text})
    form = HttpConnector().prepare(client, ("post",), ("https://api.test/v1/x",), {"data": {"u": "bob", "pin": "1"}})
    assert plain is not None and form is not None
    assert Redactor().redact(plain.payload)["body"] == "pay with [REDACTED], password=[REDACTED]"
    assert Redactor().redact(form.payload)["body"] == {"u": "bob", "pin": REDACTED}


def test_an_error_text_keeps_its_words_but_not_its_secrets() -> None:
    error = "CardError: card 4000 0566 5566 5556 declined; Authorization: Bearer abc.def; 'cvc': '314' at 10:20:23"
    assert Redactor().redact_text(error) == (
        "CardError: card [REDACTED] declined; Authorization: [REDACTED]; 'cvc': '[REDACTED]' at 10:20:23"
    )


def test_short_secret_words_count_only_as_whole_words_of_a_key() -> None:
    keys = ["X-Auth-Key", "passKey", "card[pin]", "sig", "spinner", "compass", "Idempotency-Key", "monkey"]
    assert [Redactor().is_sensitive_key(k) for k in keys] == [True, True, True, True, False, False, False, False]


def test_a_token_in_a_url_path_is_redacted_but_ids_and_names_are_kept() -> None:
    redactor = Redactor()
    assert redactor.redact_text("POST /services/T1/B1/aB1cD2eF3gH4iJ5kL6mN7oP8") == "POST /services/T1/B1/[REDACTED]"
    telegram = "https://api.telegram.org/bot123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11/sendMessage"
    assert redactor.redact_text(telegram) == "https://api.telegram.org/[REDACTED]/sendMessage"
    kept = [
        "DELETE /v1/payment_intents/pi_3MtwBwLkdIwHu7ix28a3tqPa",
        "DELETE /v1/x/550e8400-e29b-41d4-a716-446655440000",
        "POST /v1/Very-Long-Resource-Name2024",
    ]
    assert [redactor.redact_text(path) for path in kept] == kept
