"""The SDK's HTTP to an AgentRein server, shared by the agent's transport (:class:`~agentrein.served.ServedMode`)
and the operator's :class:`~agentrein.admin.AdminClient`: one request at a time, answered with its JSON or
with the named error its problem+json stands for (``agentrein_core.errors.from_problem``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import msgspec

from agentrein_core import errors
from agentrein_core.retry import retrying

URL_ENV = "AGENTREIN_URL"
API_KEY_ENV = "AGENTREIN_API_KEY"


class Connection:
    """One API key's connection to the server at ``base_url``."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 10.0) -> None:
        if not api_key:
            raise errors.ValidationError("api_key", f"server mode needs an API key (api_key= or ${API_KEY_ENV})")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {api_key}", "User-Agent": "agentrein-sdk"},
            timeout=timeout,
        )

    def call(self, method: str, path: str, *, json: Any = None, params: Any = None, wait: float = 0.0) -> Any:
        """One request; its JSON answer, or the named error its problem+json describes. Reads are retried on
        connection failures (they change nothing); writes are not, as the server may have applied them.
        ``wait``: how long the server may hold the answer back (a long-poll), on top of the timeout."""
        response = self._request(method, path, json=json, params=params, wait=wait)
        return None if response.status_code == 204 else _json(response)

    def listed(self, path: str, params: Any = None) -> list[Any]:
        """Every item of a list the server answers in pages (a JSON array each, the next one named by the
        ``Link`` header's ``rel="next"``)."""
        items: list[Any] = []
        following: str | None = path
        while following is not None:
            response = self._request("GET", following, params=params)
            items += _json(response)
            following, params = response.links.get("next", {}).get("url"), None  # the link carries the query
        return items

    def _request(
        self, method: str, path: str, *, json: Any = None, params: Any = None, wait: float = 0.0
    ) -> httpx.Response:
        timeout = self.timeout + wait
        attempts = 3 if method == "GET" else 1
        try:
            for attempt in retrying(_is_connection_error, attempts):
                with attempt:
                    response = self._http.request(method, path, json=json, params=params, timeout=timeout)
        except httpx.HTTPError as exc:
            raise errors.AgentReinUnavailableError(f"AgentRein server {self.base_url} unreachable: {exc}") from exc
        if response.is_success:
            return response
        try:
            body = _json(response)
        except ValueError:
            body = None
        raise errors.from_problem(response.status_code, body)

    def close(self) -> None:
        self._http.close()


def _json(response: httpx.Response) -> Any:
    """The answer's JSON: msgspec reads it in a tenth of the time ``response.json()`` takes (the server writes
    its answers with msgspec, so whatever it sends reads back the same)."""
    return msgspec.json.decode(response.content)


def segment(record_id: str) -> str:
    """An id as one path segment: an id with a slash in it must not reach another route."""
    return quote(record_id, safe="")


def _is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.RemoteProtocolError)
