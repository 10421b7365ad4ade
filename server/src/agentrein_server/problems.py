"""Every error as RFC 9457 problem+json: ``{"type", "title", "status", "detail", ...}``.

AgentRein's named errors are written as ``agentrein_core.errors.to_problem`` says; Litestar's own (a body that is not
JSON or does not match the schema, an unknown route, an oversize body) are mapped to the same shape. Anything
else is a bug: logged with its traceback, answered with a plain 500 that shows none.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException

from agentrein_core import errors

log = logging.getLogger("agentrein.server")

PROBLEM_JSON = "application/problem+json"


class Problem(msgspec.Struct):
    """The shape of every error body, for the OpenAPI document (some errors add fields, e.g. ``field``)."""

    type: str
    title: str
    status: int
    detail: str


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


def answer(body: dict[str, Any]) -> Response[dict[str, Any]]:
    """A problem+json body (``agentrein_core.errors.problem``) as the response."""
    status = int(body["status"])
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return Response(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def agentrein_error(_: Request[Any, Any, Any], exc: errors.AgentReinError) -> Response[dict[str, Any]]:
    if exc.status == 500:
        log.error("AgentRein error answered with 500", exc_info=exc)
    return answer(errors.to_problem(exc))


def http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    status = exc.status_code
    detail = exc.detail
    if isinstance(exc, ValidationException) and isinstance(exc.extra, list) and exc.extra:
        reasons = "; ".join(_describe(item) for item in exc.extra)
        detail = f"{detail}: {reasons}"
    if status >= 500:
        log.error("server error on %s %s", request.method, request.url.path, exc_info=exc)
        detail = "internal error"
    slug = HTTP_TYPES.get(status, "http-error" if status < 500 else "internal-error")
    return answer(errors.problem(status, slug, detail))


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
