"""The http connector: REST calls made through an ``httpx.Client`` or ``httpx.AsyncClient``.

- ``GET``/``HEAD``/``OPTIONS`` are reads and pass through unrecorded; ``POST`` is a CREATE, ``PUT``/``PATCH``
  an UPDATE, ``DELETE`` a DELETE. The api name is ``"METHOD /path"`` (no query string).
- Every recorded request carries an ``Idempotency-Key`` header (the same on every retry of the action).
- A CREATE is undone by ``DELETE`` of the response's ``Location``, else of ``{request path}/{json id}``;
  other calls are not undone unless the caller gives an undo (``http-delete`` or ``http-request``).
- An error status (>= 400) raises ``httpx.HTTPStatusError``; connect/read errors and 429/502/503/504 are
  transient.
- A client closed before the rollback (``with httpx.Client(...) as raw:``) is reopened for its inverses with
  the same settings and transports (:mod:`agentrein_http.reopen`).
- In the server, inverses are sent only where the organisation allows, because an undo is described by the
  agent while the server adds the organisation's credentials to it. Config: ``allowedHosts`` (``host`` or
  ``host:port``, one without a port matching any port; a host is an exact name or IP address, ``[v6]``
  with a port, or ``*.`` and a domain of two labels or more, such as ``*.example.com``: ``*``, ``*.com`` or
  ``127.0.0.*`` are refused; none: no undo runs), ``allowedMethods`` (default ``["DELETE"]``: an
  ``http-request`` undo with another method is refused unless listed) and ``allowedPaths`` (path globs,
  default any). Credentials: ``{"headers": {...}}``, added to every inverse.
- Inverses reach public addresses only, unless the server sets ``AGENTREIN_ALLOW_PRIVATE_TARGETS=1``
  (:mod:`agentrein_core.targets`): ``allowedHosts`` is a target setting, so the engine refuses an exact host
  that is, or resolves to, a loopback, private, link-local or metadata address when the settings are stored,
  and every inverse's host is resolved once, checked, and connected to at the address checked.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any, ClassVar
from urllib.parse import parse_qsl

import httpx

from agentrein_core.connector import (
    DEFAULT_PORTS,
    JSON,
    REDACTED,
    UNDO_NONE,
    Action,
    Connector,
    OperationType,
    PreparedCall,
    Setting,
    SettingKind,
    Undoable,
    UndoConfig,
    UndoError,
    UndoOutlook,
    ValidationError,
    host_allowed,
    host_entries,
    merge_undo,
    pinned_client,
)
from agentrein_http.reopen import reopened

IDEMPOTENCY_HEADER = "Idempotency-Key"
HTTP_DELETE = "http-delete"
HTTP_REQUEST = "http-request"
ALLOWED_HOSTS = "config.allowedHosts"

OPERATIONS = {
    "POST": OperationType.CREATE,
    "PUT": OperationType.UPDATE,
    "PATCH": OperationType.UPDATE,
    "DELETE": OperationType.DELETE,
}
READS = frozenset({"GET", "HEAD", "OPTIONS"})
SHORTHANDS = frozenset({"post", "put", "patch", "delete"})
TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})
TRANSIENT_ERRORS = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadError,
    httpx.ReadTimeout,
    httpx.RemoteProtocolError,
    httpx.WriteError,
)
GONE_STATUSES = frozenset({404, 410})
#: Headers that say nothing about the call and are left out of the record.
UNRECORDED_HEADERS = frozenset({"accept", "accept-encoding", "connection", "user-agent", "host", "content-length"})
MAX_BODY = 64 * 1024
_SEND_OPTIONS = ("auth", "follow_redirects")
_TEMPLATE_FIELD = re.compile(r"\{(\w+)\}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[^\r\n\x00]*")


class HttpConnector(Connector):
    name: ClassVar[str] = "http"
    sensitive_fields: ClassVar[frozenset[str]] = frozenset({"signature", "credential"})
    undo_types: ClassVar[frozenset[str]] = frozenset({HTTP_DELETE, HTTP_REQUEST})
    settings: ClassVar[tuple[Setting, ...]] = (
        Setting(
            "allowedHosts",
            "Allowed hosts",
            "Where undos may be sent, one per line: a host, or host:port (a host without a port allows any "
            "port). None: no undo runs, since agents describe their own undos.",
            SettingKind.HOSTS,
            example="api.example.com\n*.example.com",
        ),
        Setting(
            "allowedMethods",
            "Allowed methods",
            "The HTTP methods an undo may use, one per line, among POST, PUT, PATCH and DELETE. Empty: DELETE only.",
            SettingKind.LIST,
            example="DELETE\nPOST",
        ),
        Setting(
            "allowedPaths",
            "Allowed paths",
            "The paths undos may reach, one glob per line (* matches anything). Empty: any path.",
            SettingKind.LIST,
            example="/v1/*",
        ),
        Setting(
            "headers",
            "Headers",
            "Added to every undo request, one Name: value per line, such as the Authorization the service needs.",
            SettingKind.HEADERS,
            secret=True,
            example="Authorization: Bearer …",
        ),
    )

    def accepts(self, client: Any) -> bool:
        return isinstance(client, httpx.Client | httpx.AsyncClient)

    def prepare(
        self, client: Any, path: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> PreparedCall | None:
        if len(path) != 1:
            return None
        name = path[0]
        if name in SHORTHANDS:
            method = name.upper()
        elif name in ("request", "stream"):
            method = str(args[0] if args else kwargs.get("method", "")).upper()
        elif name == "send":
            method = (args[0] if args else kwargs["request"]).method
        else:
            return None  # get/head/options, build_request, close, properties...
        if method in READS:
            return None
        if name == "stream":
            raise ValidationError(
                "stream", "the http connector records only complete requests; use client.request() for writes"
            )
        send_options = {k: kwargs.pop(k) for k in _SEND_OPTIONS if k in kwargs}
        if name == "send":
            request: httpx.Request = args[0] if args else kwargs.pop("request")
            send_options.update({k: v for k, v in kwargs.items() if k in ("stream",)})
        elif name == "request":
            request = client.build_request(*args, **kwargs)
        else:
            request = client.build_request(method, *args, **kwargs)
        is_async = isinstance(client, httpx.AsyncClient)

        def run(idempotency_key: str) -> Any:
            request.headers[IDEMPOTENCY_HEADER] = idempotency_key
            if is_async:
                return _send_async(client, request, send_options)
            return _checked(client.send(request, **send_options))

        return PreparedCall(
            api_name=f"{method} {request.url.path}",
            operation_type=OPERATIONS.get(method, OperationType.OTHER),
            payload=_describe_request(request),
            run=run,
            is_async=is_async,
            context=request,
        )

    def record_result(self, call: PreparedCall, result: Any) -> JSON:
        response: httpx.Response = result
        recorded: JSON = {
            "statusCode": response.status_code,
            "body": _body(response.headers, response.content),
        }
        if "location" in response.headers:
            recorded["location"] = response.headers["location"]
        return recorded

    def undo_for(self, call: PreparedCall, result: Any, override: Mapping[str, Any] | None) -> UndoConfig:
        request: httpx.Request = call.context
        response: httpx.Response = result
        body = _body(response.headers, response.content)
        fields = body if isinstance(body, dict) else {}
        derived = UndoConfig(UNDO_NONE)
        if call.operation_type is OperationType.CREATE:
            if "location" in response.headers:
                derived = UndoConfig(HTTP_DELETE, {"url": str(response.url.join(response.headers["location"]))})
            elif fields.get("id") is not None:
                derived = UndoConfig(HTTP_DELETE, {"url": f"{_without_query(request.url).rstrip('/')}/{fields['id']}"})
        undo = merge_undo(derived, override)
        if "path" in undo.params:  # a caller's template, e.g. {"path": "/v1/things/{id}/cancel"}
            params = dict(undo.params)
            target = _TEMPLATE_FIELD.sub(lambda m: str(fields.get(m.group(1), m.group(0))), params.pop("path"))
            params["url"] = str(request.url.join(target))
            undo = UndoConfig(undo.type, params, undo.require_approval)
        return undo

    def check_undo_override(self, api_name_glob: str, override: Mapping[str, Any]) -> None:
        super().check_undo_override(api_name_glob, override)
        if override.get("type") == HTTP_REQUEST and str(override.get("method", "")).upper() not in OPERATIONS:
            raise ValidationError(
                f"undo[{api_name_glob!r}].method",
                "an http-request undo needs a method among POST, PUT, PATCH, DELETE",
            )

    def check_undo(self, undo: UndoConfig) -> None:
        super().check_undo(undo)
        if undo.type in self.undo_types:
            url = undo.params.get("url")
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValidationError("undo.url", "an http undo needs the absolute http(s) URL to call")
        if undo.type == HTTP_REQUEST and str(undo.params.get("method", "")).upper() not in OPERATIONS:
            raise ValidationError("undo.method", "an http-request undo needs a method among POST, PUT, PATCH, DELETE")

    def check_config(self, config: JSON, credentials: JSON, org_id: str) -> None:
        # allowedHosts is a target (SettingKind.HOSTS): the engine checks it (connector.check_settings)
        _only_keys("config", config, {"allowedHosts", "allowedMethods", "allowedPaths"})
        _globs(config, "allowedPaths", "path globs, e.g. ['/v1/*']")
        methods = _globs(config, "allowedMethods", "HTTP methods, e.g. ['DELETE', 'POST']")
        if any(m.upper() not in OPERATIONS for m in methods):
            raise ValidationError("config.allowedMethods", "methods must be among POST, PUT, PATCH, DELETE")
        _only_keys("credentials", credentials, {"headers"})
        headers = credentials.get("headers", {})
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and _HEADER_NAME.fullmatch(k) and isinstance(v, str) and _HEADER_VALUE.fullmatch(v)
            for k, v in headers.items()
        ):
            raise ValidationError("credentials.headers", "must map header names to single-line string values")

    def server_client(self, config: JSON, credentials: JSON, org_id: str) -> httpx.Client:
        # Checked again: settings stored before the rule on hosts was tightened may allow every host.
        hosts = host_entries(ALLOWED_HOSTS, config.get("allowedHosts", []))
        methods = {m.upper() for m in config.get("allowedMethods", ["DELETE"])}
        paths = tuple(config.get("allowedPaths", ["*"]))

        def refuse_what_is_not_allowed(request: httpx.Request) -> None:
            host = request.url.raw_host.decode("ascii")
            port = request.url.port or DEFAULT_PORTS.get(request.url.scheme, 80)
            if not host_allowed(hosts, host, port):
                raise UndoError(
                    f"undo refused: {host}:{port} is not in the http connector's allowedHosts "
                    f"({', '.join(config.get('allowedHosts', [])) or 'none configured'})"
                )
            if request.method not in methods:
                allowed = ", ".join(sorted(methods))
                raise UndoError(f"undo refused: {request.method} is not in allowedMethods ({allowed})")
            if not any(fnmatchcase(request.url.path, glob) for glob in paths):
                raise UndoError(f"undo refused: {request.url.path} is not in allowedPaths ({', '.join(paths)})")

        # The pinned client refuses a host whose address is not public, on the very answer it connects to.
        return pinned_client(
            "undo.url",
            headers=credentials.get("headers", {}),
            event_hooks={"request": [refuse_what_is_not_allowed]},
            follow_redirects=False,  # a redirect must not lead an inverse off the allowed hosts
            timeout=30.0,
        )

    def is_closed(self, client: Any) -> bool:
        return bool(client.is_closed)

    def reopen(self, client: Any) -> httpx.Client | httpx.AsyncClient:
        return reopened(client)

    def is_transient(self, error: BaseException) -> bool:
        if isinstance(error, httpx.HTTPStatusError):
            return error.response.status_code in TRANSIENT_STATUSES
        return isinstance(error, TRANSIENT_ERRORS)

    def run_undo(self, undo: UndoConfig, client: Any, idempotency_key: str) -> Any:
        if undo.type not in self.undo_types:
            return super().run_undo(undo, client, idempotency_key)
        method = "DELETE" if undo.type == HTTP_DELETE else str(undo.params["method"]).upper()
        request = client.build_request(
            method,
            undo.params["url"],
            json=undo.params.get("json"),
            headers={IDEMPOTENCY_HEADER: idempotency_key},
        )
        if isinstance(client, httpx.AsyncClient):
            return _undo_async(client, request)
        return _undo_outcome(client.send(request))

    def describe(self, action: Action) -> str:
        method, _, path = action.api_name.partition(" ")  # what a record without a request's details still says
        method = str(action.payload.get("method") or method)
        url, made = str(action.payload.get("url", "")), _made(action.response)
        # A reviewer's page describes each action it lists at every look: the words of a short URL are kept.
        return (_call_in_words_once if len(url) <= _KEPT_URL else _call_in_words)(method, url, path, made)

    def describe_undo(self, action: Action) -> str:
        undo = action.undo
        if undo is None or undo.type not in self.undo_types:
            method = str(action.payload.get("method", "the call")).upper()
            if action.operation_type is OperationType.CREATE:
                return "its answer named nothing to delete (no Location, no id), and the agent's code gave no undo"
            return f"a {method} has no inverse of its own, and the agent's code gave none"
        method = "DELETE" if undo.type == HTTP_DELETE else str(undo.params.get("method", "")).upper()
        url = _parsed(str(undo.params.get("url", "")))
        verb = "Delete" if method == "DELETE" else method
        return f"{verb} {url.path} on {_host(url)}" + (" with a JSON body" if undo.params.get("json") else "")

    def foresee_undo(self, action: Action) -> UndoOutlook:
        if action.operation_type is OperationType.CREATE:
            return UndoOutlook(
                Undoable.YES, "Delete what it creates (a DELETE of the answer's Location, or of the path and its id)"
            )
        method = str(action.payload.get("method", "")).upper() or "call"
        return UndoOutlook(
            Undoable.UNKNOWN,
            f"the http connector undoes only creates; a {method} is undone only by an undo the agent's code "
            "gives, which the server learns once the call has run",
        )

    def target_host(self, action: Action) -> str | None:
        url = _recorded_url(action)
        return _host(url) if url.host else None


def _globs(config: JSON, key: str, what: str) -> list[str]:
    value = config.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValidationError(f"config.{key}", f"must be a list of {what}")
    return value


def _only_keys(field: str, value: JSON, allowed: set[str]) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ValidationError(f"{field}.{unknown[0]}", f"unknown setting (allowed: {', '.join(sorted(allowed))})")


def _checked(response: httpx.Response) -> httpx.Response:
    response.raise_for_status()
    return response


async def _send_async(client: httpx.AsyncClient, request: httpx.Request, options: dict[str, Any]) -> httpx.Response:
    return _checked(await client.send(request, **options))


def _undo_outcome(response: httpx.Response) -> None:
    if response.is_success or response.status_code in GONE_STATUSES:
        return  # gone now, or already gone: either way the effect is undone
    if response.status_code in TRANSIENT_STATUSES:
        response.raise_for_status()  # an HTTPStatusError, which is_transient() lets the executor retry
    raise UndoError(f"{response.request.method} {response.request.url} answered {response.status_code}")


async def _undo_async(client: httpx.AsyncClient, request: httpx.Request) -> None:
    _undo_outcome(await client.send(request))


def _describe_request(request: httpx.Request) -> JSON:
    headers = {k: v for k, v in request.headers.items() if k.lower() not in UNRECORDED_HEADERS}
    return {
        "method": request.method,
        "url": _without_query(request.url),
        "query": dict(parse_qsl(request.url.query.decode("ascii", "replace"), keep_blank_values=True)),
        "headers": headers,
        "body": _body(request.headers, request.content),
    }


def _without_query(url: httpx.URL) -> str:
    """The URL to store: no query string (recorded apart, redacted by key) and no password."""
    if url.userinfo:
        url = url.copy_with(password=REDACTED) if url.password else url
    return str(url).partition("?")[0]


def _body(headers: httpx.Headers, content: bytes) -> Any:
    if not content:
        return None
    if len(content) > MAX_BODY:
        return f"<{len(content)} bytes>"
    content_type = headers.get("content-type", "")
    if "json" in content_type:
        try:
            return json.loads(content)
        except ValueError:
            pass
    if "x-www-form-urlencoded" in content_type:
        return dict(httpx.QueryParams(content.decode("utf-8", "replace")).multi_items())
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(content)} bytes>"


def _recorded_url(action: Action) -> httpx.URL:
    try:
        return _parsed(str(action.payload.get("url", "")))
    except httpx.InvalidURL:
        return httpx.URL("")


#: URLs longer than this are parsed each time, not kept: a recorded URL may be as long as a request body.
_KEPT_URL = 2_048


def _parsed(url: str) -> httpx.URL:
    """``url`` parsed (``httpx.InvalidURL`` if it cannot be), once if it is short: a reviewer's page describes
    each of its actions and their undos, asking for the same URLs again at every look (``httpx.URL`` is
    immutable, so one is shared)."""
    return _parsed_once(url) if len(url) <= _KEPT_URL else httpx.URL(url)


@functools.lru_cache(maxsize=10_000)
def _parsed_once(url: str) -> httpx.URL:
    return httpx.URL(url)


def _host(url: httpx.URL) -> str:
    return f"{url.host}:{url.port}" if url.port else url.host


#: Path segments that name an API's version or prefix, not a resource.
_PREFIX_SEGMENT = re.compile(r"v\d+(\.\d+)?|api|rest")


def _made(response: JSON | None) -> str | None:
    """The id of what a create made, from its recorded answer (its body's ``id``, else its ``Location``)."""
    body = (response or {}).get("body")
    if isinstance(body, dict) and isinstance(body.get("id"), str | int) and not isinstance(body.get("id"), bool):
        return str(body["id"])
    location = (response or {}).get("location")
    if not isinstance(location, str):
        return None
    return location.split("?")[0].rstrip("/").rpartition("/")[2] or None


def _call_in_words(method: str, recorded_url: str, path: str, made: str | None) -> str:
    try:
        url = _parsed(recorded_url)
    except httpx.InvalidURL:
        url = httpx.URL("")
    return _in_words(method, url if url.path else httpx.URL(path), made)


_call_in_words_once = functools.lru_cache(maxsize=10_000)(_call_in_words)


def _in_words(method: str, url: httpx.URL, made: str | None = None) -> str:
    """A REST call in words, read from its path as collections and ids alternate (``/v1/orders/ord_14``: the
    order ``ord_14``): "Delete order ord_14 on api.example.com", "Create order ord_15 on …" (``made``: the id
    the answer gave it); a path that reads otherwise is given as is."""
    method = method.upper()
    segments = [s for s in url.path.split("/") if s]
    while segments and _PREFIX_SEGMENT.fullmatch(segments[0]):
        segments = segments[1:]
    on = f" on {_host(url)}" if url.host else ""
    pairs = [(segments[i], segments[i + 1]) for i in range(0, len(segments) - 1, 2)]
    if method == "POST" and len(segments) % 2 == 1:
        within = "".join(f" in {_singular(kind)} {name}" for kind, name in reversed(pairs))
        if _singular(segments[-1]) != _words(segments[-1]):  # a collection: POST makes one
            return f"Create {_singular(segments[-1])}{f' {made}' if made else ''}{within}{on}"
        if pairs:  # an action on the resource before it: /orders/ord_14/cancel
            (kind, name), *outer = reversed(pairs)
            within = "".join(f" in {_singular(k)} {n}" for k, n in outer)
            return f"{_words(segments[-1]).capitalize()} {_singular(kind)} {name}{within}{on}"
    verb = {"DELETE": "Delete", "PUT": "Replace", "PATCH": "Update"}.get(method)
    if verb is not None and segments and len(segments) % 2 == 0:
        (kind, name), *outer = reversed(pairs)
        within = "".join(f" in {_singular(k)} {n}" for k, n in outer)
        return f"{verb} {_singular(kind)} {name}{within}{on}"
    return f"{method} {url.path or '/'}{on}"


def _words(segment: str) -> str:
    return segment.replace("_", " ").replace("-", " ")


def _singular(collection: str) -> str:
    """``orders`` -> ``order``, ``categories`` -> ``category``, ``addresses`` -> ``address``; a word that is
    no plural stays as it is (``status``, ``cancel``)."""
    word = _words(collection)
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us")):
        return word[:-1]
    return word
