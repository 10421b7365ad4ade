"""Stripe's error answers: :class:`StripeError` and the errors the fake answers with, worded as Stripe words them."""

from __future__ import annotations

from collections.abc import Mapping

from agentrein_testing.fakes.base import JSON


class StripeError(Exception):
    """An error answer, shaped like Stripe's. ``saved``: kept for its idempotency key (the endpoint ran)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        error_type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        decline_code: str | None = None,
        extra: JSON | None = None,
        headers: Mapping[str, str] | None = None,
        saved: bool = True,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type
        self.code = code
        self.param = param
        self.decline_code = decline_code
        self.extra = extra or {}
        self.headers = dict(headers or {})
        self.saved = saved

    def body(self, request_id: str) -> JSON:
        error: JSON = {}
        if self.code is not None:
            error["code"] = self.code
            error["doc_url"] = f"https://stripe.com/docs/error-codes/{self.code.replace('_', '-')}"
        if self.decline_code is not None:
            error["decline_code"] = self.decline_code
        error["message"] = self.message
        if self.param is not None:
            error["param"] = self.param
        error["request_log_url"] = f"https://dashboard.stripe.com/test/logs/{request_id}"
        error["type"] = self.error_type
        error.update(self.extra)
        return {"error": error}


def invalid(message: str, *, code: str | None = None, param: str | None = None) -> StripeError:
    return StripeError(400, message, code=code, param=param)


def validation_error(message: str, *, code: str | None = None, param: str | None = None) -> StripeError:
    return StripeError(400, message, code=code, param=param, saved=False)


def no_such(kind: str, object_id: str, *, param: str = "id", status: int = 404) -> StripeError:
    return StripeError(status, f"No such {kind}: '{object_id}'", code="resource_missing", param=param)


def fault_error(status: int, message: str | None, code: str | None, error_type: str | None) -> StripeError:
    """The body of an injected fault: what Stripe answers with that status."""
    defaults: dict[int, tuple[str, str | None, str]] = {
        400: ("invalid_request_error", "parameter_invalid", "Injected fault: invalid request."),
        401: ("invalid_request_error", None, "Invalid API Key provided: sk_test_****"),
        402: ("card_error", "card_declined", "Your card was declined."),
        403: ("invalid_request_error", None, "The provided key does not have the required permissions."),
        404: ("invalid_request_error", "resource_missing", "Injected fault: no such resource."),
        409: (
            "invalid_request_error",
            "lock_timeout",
            "This object cannot be accessed right now because another API request or Stripe process is currently "
            "accessing it.",
        ),
        429: (
            "invalid_request_error",
            "rate_limit",
            "Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.",
        ),
    }
    default_type, default_code, default_message = defaults.get(
        status, ("api_error", None, "An unknown error occurred while processing your request.")
    )
    error = StripeError(
        status,
        message or default_message,
        error_type=error_type or default_type,
        code=code or default_code,
    )
    if status == 402 and code is None:
        error.decline_code = "generic_decline"
    return error


def auth_error(api_key: str | None) -> StripeError:
    if not api_key:
        message = (
            "You did not provide an API key. You need to provide your API key in the Authorization header, using "
            "Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See "
            "https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/."
        )
    else:
        message = f"Invalid API Key provided: {api_key[:8]}{'*' * 4}{api_key[-4:]}"
    return StripeError(401, message, headers={"WWW-Authenticate": 'Basic realm="Stripe"'}, saved=False)


def key_in_use(key: str | None) -> StripeError:
    return StripeError(
        409,
        "There is currently another in-progress request using this Idempotent Key (that probably means you submitted "
        f"twice, and the other request is still going through): {key}. Please try again later.",
        code="idempotency_key_in_use",
        saved=False,
    )


def unrecognized(method: str, path: str) -> StripeError:
    return StripeError(
        404,
        f"Unrecognized request URL ({method}: {path}). Please see https://stripe.com/docs or we can help at "
        "https://support.stripe.com/.",
        saved=False,
    )
