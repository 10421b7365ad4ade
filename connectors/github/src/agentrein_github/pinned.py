"""PyGithub's requests through :func:`agentrein_core.connector.pinned_client`, for a ``baseUrl`` an organisation
chose: the token goes only to an address checked as each request connects, however the name resolves by then
(DESIGN §8). Checking the name when the settings are stored and before each undo leaves a moment in which it
could resolve elsewhere; this closes it, as Stripe's server client does for its ``apiBase``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import requests
from github.Requester import Requester
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict

from agentrein_core.connector import pinned_client


class PinnedAdapter(BaseAdapter):
    """A requests transport that sends through a pinned httpx client (a refused address raises the
    :class:`~agentrein_core.connector.ValidationError` naming ``config.baseUrl``, before anything is sent)."""

    def __init__(self) -> None:
        super().__init__()
        self._http = pinned_client("config.baseUrl", follow_redirects=False)

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float | None, float | None] | None = None,
        verify: bool | str = True,
        cert: bytes | str | tuple[bytes | str, bytes | str] | None = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        limit = httpx.Timeout(None, connect=timeout[0], read=timeout[1]) if isinstance(timeout, tuple) else timeout
        try:
            answer = self._http.request(
                request.method or "GET",
                request.url or "",
                headers={k: v.decode("latin-1") if isinstance(v, bytes) else v for k, v in request.headers.items()},
                content=request.body,  # type: ignore[arg-type]  # PyGithub sends text or bytes
                timeout=limit,
            )
        except httpx.TransportError as exc:  # as requests says it, so the connector judges it transient
            raise requests.ConnectionError(str(exc), request=request) from exc
        response = requests.Response()
        response.status_code = answer.status_code
        response.reason = answer.reason_phrase
        response.headers = CaseInsensitiveDict(answer.headers)
        response._content = answer.content  # already decoded (gzip and the like) by httpx
        response.encoding = answer.encoding
        response.url = str(answer.url)
        response.request = request
        return response

    def close(self) -> None:
        self._http.close()


def pin(requester: Requester) -> None:
    """Make ``requester`` connect through :class:`PinnedAdapter`. PyGithub keeps the class it makes its
    connections with per requester, under a private name: the only per-client way in it offers (its
    ``injectConnectionClasses`` changes every client of the process, the agent's own too)."""
    made: Any = requester._Requester__connectionClass  # type: ignore[attr-defined]

    class Pinned(made):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            adapter = PinnedAdapter()
            self.session.mount("https://", adapter)
            self.session.mount("http://", adapter)

    requester._Requester__connectionClass = Pinned  # type: ignore[attr-defined]
