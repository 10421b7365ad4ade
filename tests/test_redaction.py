"""What never reaches the store: secrets by key, card numbers by shape, passwords in URLs."""

from __future__ import annotations

import logging
from fnmatch import fnmatchcase

import httpx
import pytest

from agentrein_core.model import UndoConfig
from agentrein_core.redaction import REDACTED, Redactor, redact_logs
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


def test_a_short_or_lowercase_token_after_a_word_that_names_a_secret_is_redacted() -> None:
    redactor = Redactor()
    paths = {
        "POST /password/reset/k3j9x2": "POST /password/reset/[REDACTED]",
        "POST /api/token/abc123xyz/refresh": "POST /api/token/[REDACTED]/refresh",
        "GET /invite/q7w8e9": "GET /invite/[REDACTED]",
        "GET /reset/550e8400-e29b-41d4-a716-446655440000": "GET /reset/[REDACTED]",
        "DELETE /v1/api_keys/k3j9x2": "DELETE /v1/api_keys/[REDACTED]",
        "POST /api/webhooks/123456789/k3j9x2m4n8": "POST /api/webhooks/123456789/[REDACTED]",
        "POST /services/T0001/B0002/abcdefghijklmnopqrstuvwx": "POST /services/T0001/B0002/[REDACTED]",
    }
    assert {path: redactor.redact_text(path) for path in paths} == paths


def test_a_random_looking_path_segment_is_redacted_whatever_its_case() -> None:
    redactor = Redactor()
    paths = {
        "POST /v1/feeds/k3j9x2m4n8p1q7r5s6t0/items": "POST /v1/feeds/[REDACTED]/items",  # all lowercase
        "POST /v1/blobs/" + "ab12" * 16: "POST /v1/blobs/[REDACTED]",  # 64 hex digits
        "POST /v1/x/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl": "POST /v1/x/[REDACTED]",  # a JWT
    }
    assert {path: redactor.redact_text(path) for path in paths} == paths


def test_ordinary_path_segments_are_kept_however_long() -> None:
    kept = [
        "POST /v1/customers/cus_123",
        "POST /repos/acme/web/issues/12",
        "DELETE /v1/x/550e8400-e29b-41d4-a716-446655440000",
        "PUT /users/ada-lovelace",
        "POST /reports/2024-05-01/summary",
        "POST /blog/how-to-refund-a-customer-order-in-2024",
        "POST /v1/Very-Long-Resource-Name2024",
        "DELETE /v1/things/507f1f77bcf86cd799439011",  # a MongoDB ObjectId
        "POST /repos/acme/web/statuses/da39a3ee5e6b4b0d3255bfef95601890afd80709",  # a git SHA-1
        "DELETE /2010-04-01/Accounts/AC0123456789abcdef0123456789abcdef/Calls/CA0123456789abcdef0123456789abcdef",
        "DELETE /v1/keys/key_123",
        "DELETE /v1/api_keys/550e8400-e29b-41d4-a716-446655440000",
        "DELETE /user/keys/123",
        "POST /repos/acme/web/hooks/123/pings",
        "PUT /repos/acme/web/actions/secrets/DB_PASSWORD2",
        "POST /v1/password/reset",
        "POST /monkey/abc123",
        "GET /dashboard/sessions/ses_0123456789abcdef0123456789abcdef",
    ]
    redactor = Redactor()
    assert [redactor.redact_text(path) for path in kept] == kept


def test_known_token_shapes_and_bearer_tokens_are_redacted_in_free_text() -> None:
    text = (
        "use ghp_aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2, sk_live_51HqLyjWDarjtT1zdp7dc, xoxb-1234-5678-abcdefghij, "
        "AKIAIOSFODNN7EXAMPLE or send Bearer eyJabc.def12345; a bearer token, sk-learn-tutorial-for-beginners-2024"
    )
    assert Redactor().redact_text(text) == (
        "use [REDACTED], [REDACTED], [REDACTED], [REDACTED] or send Bearer [REDACTED]; a bearer token, "
        "sk-learn-tutorial-for-beginners-2024"
    )


def test_a_log_record_and_its_traceback_are_redacted_by_the_stores_rules(caplog: pytest.LogCaptureFixture) -> None:
    url = "https://hooks.test/services/T1/B1/aB1cD2eF3gH4iJ5kL6mN7oP8"
    logger = logging.getLogger("agentrein.test-redaction")
    redact_logs(Redactor(), [logger.name])
    with caplog.at_level(logging.INFO, logger=logger.name):
        logger.info('HTTP Request: %s %s "%s"', "POST", url, "HTTP/1.1 200 OK")
        try:
            raise ValueError(f"could not reach {url}")
        except ValueError:
            logger.exception("delivery failed")
    shown = caplog.text
    assert "aB1cD2eF3gH4iJ5kL6mN7oP8" not in shown
    assert 'HTTP Request: POST https://hooks.test/services/T1/B1/[REDACTED] "HTTP/1.1 200 OK"' in shown
    assert "ValueError: could not reach https://hooks.test/services/T1/B1/[REDACTED]" in shown


AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
    "KUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAwEAAQ==\n-----END RSA PRIVATE KEY-----"
)


def test_sendgrid_keys_private_keys_url_passwords_secretish_keys_and_aws_secrets_are_redacted_in_free_text() -> None:
    redactor = Redactor()
    texts = {
        "mail 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 now": "mail [REDACTED] now",
        f"key:\n{PEM}\nend": "key:\n[REDACTED]\nend",
        f"cut short: {PEM[:80]}": "cut short: [REDACTED]",
        "see https://bob:hunter2@api.test/v1/x": "see https://bob:[REDACTED]@api.test/v1/x",
        "db postgresql://app:p@ss/w0rd@db.internal:5432/app": "db postgresql://app:[REDACTED]@db.internal:5432/app",
        "redis://:s3cr3t@cache:6379/0": "redis://:[REDACTED]@cache:6379/0",
        "db_pw: letmein, DB_PW=abc, dbPw=xyz": "db_pw: [REDACTED], DB_PW=[REDACTED], dbPw=[REDACTED]",
        "creds: c1, credential=c2": "creds: [REDACTED], credential=[REDACTED]",
        f"aws {AWS_SECRET} done": "aws [REDACTED] done",
    }
    assert {text: redactor.redact_text(text) for text in texts} == texts


def test_a_dsns_password_is_redacted_under_a_dsn_key() -> None:
    assert Redactor().redact({"dsn": "postgresql://app:s3cr3t@db/app"}) == {"dsn": "postgresql://app:[REDACTED]@db/app"}


def test_git_shas_stripe_ids_public_pems_and_paths_of_forty_characters_are_kept() -> None:
    kept = [
        "revert da39a3ee5e6b4b0d3255bfef95601890afd80709",  # a git SHA-1: 40 hex digits
        "revert DA39A3EE5E6B4B0D3255BFEF95601890AFD80709",
        "refund cus_NffrFeUfNV2Hib and pi_3MtwBwLkdIwHu7ix28a3tqPa",
        "see repos/Acme/Web2/issues/12/comments/Abc1x",  # 40 characters of a path
        "-----BEGIN CERTIFICATE-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
        "KUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAwEA\n-----END CERTIFICATE-----",  # its last line: 40 characters
        "mailto:ada@example.com and https://api.test/v1/x?at=10:20",
    ]
    redactor = Redactor()
    assert [redactor.redact_text(text) for text in kept] == kept


def test_an_undos_url_json_body_and_text_are_redacted_but_its_ids_are_kept() -> None:
    token = "ghp_aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2"
    undo = UndoConfig(
        "http-request",
        {
            "method": "POST",
            "url": f"https://api.test/v1/revert/da39a3ee5e6b4b0d3255bfef95601890afd80709?key={token}",
            "json": {"customer": "cus_NffrFeUfNV2Hib", "note": f"use {token}", "dsn": "postgresql://a:pw@db/x"},
        },
    )
    redacted = Redactor().redact_undo(undo)
    assert redacted is not None and redacted.params == {
        "method": "POST",
        "url": "https://api.test/v1/revert/da39a3ee5e6b4b0d3255bfef95601890afd80709?key=[REDACTED]",
        "json": {"customer": "cus_NffrFeUfNV2Hib", "note": "use [REDACTED]", "dsn": "postgresql://a:[REDACTED]@db/x"},
    }


def test_a_globs_secrets_are_redacted_but_its_wildcards_kept_so_it_matches_the_redacted_text() -> None:
    redactor = Redactor()
    api_name = "POST /services/T1/B1/aB1cD2eF3gH4iJ5kL6mN7oP8"
    globs = {
        api_name: "POST /services/T1/B1/[[]REDACTED]",
        "POST /services/T1/B1/aB1cD2eF3gH4iJ5kL6mN7oP8?": "POST /services/T1/B1/[[]REDACTED]",
        "DELETE /v1/tokens/*": "DELETE /v1/tokens/*",
        "DELETE /v1/api_keys/[a-z]*": "DELETE /v1/api_keys/[a-z]*",
    }
    assert {glob: redactor.redact_glob(glob) for glob in globs} == globs
    assert fnmatchcase(redactor.redact_text(api_name), globs[api_name])
