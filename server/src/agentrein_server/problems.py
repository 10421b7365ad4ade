"""Every error as RFC 9457 problem+json: ``{"type", "title", "status", "detail", ...}``.

AgentRein's named errors are written as ``agentrein_core.errors.to_problem`` says; Litestar's own (a body that is not
JSON or does not match the schema, an unknown route, an oversize body) are mapped to the same shape. Anything
else is a bug: logged with its traceback, answered with a plain 500 that shows none.
"""

from __future__ import annotations

import logging
import operator
from functools import reduce
from typing import Any, get_type_hints

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi import ResponseSpec

from agentrein_core import errors

log = logging.getLogger("agentrein.server")

PROBLEM_JSON = "application/problem+json"


def _problem_details() -> type[msgspec.Struct]:
    """The shape of every error body, for the OpenAPI document: ``type``, ``title``, ``status``, ``detail`` and
    ``rollsBack`` (whether the session is rolled back when recording a call meets it), and each field a named
    error adds (``errors.AgentReinError.problem_fields``), present in that error's body
    only."""
    added: dict[str, set[Any]] = {}
    for error in errors.PROBLEM_TYPES.values():
        hints = get_type_hints(error)
        for sent, attribute in error.problem_fields.items():
            added.setdefault(sent, set()).add(hints[attribute])
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = [
        ("type", str),
        ("title", str),
        ("status", int),
        ("detail", str),
        # Sent in every body; optional for a client, since a server older than it leaves it out.
        ("rollsBack", bool | msgspec.UnsetType, msgspec.UNSET),
    ]
    for sent, kinds in added.items():
        fields.append((sent, reduce(operator.or_, sorted(kinds, key=repr)) | msgspec.UnsetType, msgspec.UNSET))
    return msgspec.defstruct("ProblemDetails", fields, module=__name__, kw_only=True)


ProblemDetails = _problem_details()

#: Slugs for Litestar's HTTP errors.
HTTP_TYPES = {
    400: "validation-error",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    413: "payload-too-large",
    415: "unsupported-media-type",
}
#: What Litestar refuses before a handler runs, beside the named errors, for the OpenAPI document.
HTTP_REFUSALS = {
    413: "the body is larger than the server takes",
    415: "the body is not declared as 'Content-Type: application/json' (in UTF-8, the one charset taken)",
}
#: Why the server answers 503 (the error's own docstring speaks for the SDK, which raises it too).
UNAVAILABLE = "the database does not answer now; try again later"


def documented(*refused: type[errors.AgentReinError], body: bool = False, key: bool = True) -> dict[int, ResponseSpec]:
    """The OpenAPI answers of an operation's errors, each status with the problem types it carries: the named
    errors ``refused``; an API key missing or unknown (401) unless the operation needs no ``key``; a database
    that does not answer (503); and with a JSON ``body``, a body that is invalid (400), too large (413) or not
    JSON (415)."""
    named: list[type[errors.AgentReinError]] = [
        *([errors.UnauthorizedError] if key else []),
        *refused,
        *([errors.ValidationError] if body else []),
    ]
    reasons: dict[int, list[str]] = {}
    for error in dict.fromkeys(named):
        reasons.setdefault(error.status, []).append(f"`{error.problem_type}`: {_first_line(error.__doc__)}")
    for status in HTTP_REFUSALS if body else ():
        reasons.setdefault(status, []).append(f"`{HTTP_TYPES[status]}`: {HTTP_REFUSALS[status]}")
    unavailable = errors.AgentReinUnavailableError
    reasons[unavailable.status] = [f"`{unavailable.problem_type}`: {UNAVAILABLE}"]
    return {status: problem_answer("; ".join(reasons[status])) for status in sorted(reasons)}


def problem_answer(description: str) -> ResponseSpec:
    return ResponseSpec(ProblemDetails, description=description, media_type=PROBLEM_JSON, generate_examples=False)


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().split("\n\n", 1)[0].replace("\n", " ").rstrip(".")


def answer(body: dict[str, Any], headers: dict[str, str] | None = None) -> Response[dict[str, Any]]:
    """A problem+json body (``agentrein_core.errors.problem``) as the response, with ``headers``."""
    status = int(body["status"])
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return Response(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def agentrein_error(_: Request[Any, Any, Any], exc: errors.AgentReinError) -> Response[dict[str, Any]]:
    if exc.status == 500:
        log.error("AgentRein error answered with 500", exc_info=exc)
    return answer(errors.to_problem(exc))


def http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    status = exc.status_code
    detail = exc.detail
    fields: dict[str, Any] = {}
    if isinstance(exc, ValidationException) and isinstance(exc.extra, list) and exc.extra:
        reasons = "; ".join(_describe(item) for item in exc.extra)
        detail = f"{detail}: {reasons}"
        keys = {item.get("key") for item in exc.extra if isinstance(item, dict)}
        if len(exc.extra) == 1 and keys != {None}:  # one field at fault, named as a ValidationError names it
            fields["field"] = keys.pop()
    if status >= 500:
        log.error("server error on %s %s", request.method, request.url.path, exc_info=exc)
        detail = "internal error"
    slug = HTTP_TYPES.get(status, "http-error" if status < 500 else "internal-error")
    # Litestar's own headers, such as the ``Allow`` of a 405 (RFC 9110 requires it)
    return answer(errors.problem(status, slug, detail) | fields, exc.headers if status < 500 else None)


def too_deep(_: Request[Any, Any, Any], exc: RecursionError) -> Response[dict[str, Any]]:
    return answer(errors.problem(400, "validation-error", "the JSON body is nested too deeply"))


def unexpected_error(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return answer(errors.problem(500, "internal-error", "internal error; the server has logged it"))


def _describe(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    where = item.get("key") or item.get("source") or ""
    return f"{item.get('message', 'invalid')}" + (f" ({where})" if where else "")


HANDLERS: dict[type[Exception] | int, Any] = {
    errors.AgentReinError: agentrein_error,
    HTTPException: http_error,
    RecursionError: too_deep,
    Exception: unexpected_error,
}
