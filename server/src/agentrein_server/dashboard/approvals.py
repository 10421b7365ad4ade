"""The approvals queue: what waits for a decision (the requests an agent or a rollback waits for first, by
time left; then after-execution reviews), each card saying what approving and rejecting do; then the latest
decided, each saying what its decision did. Decisions in one click, recorded with the signed-in reviewer's
email as ``resolvedBy``. The queue polls a fragment that answers 204 while nothing changed, so a reason being
typed is not swept away."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, get, post
from litestar.enums import RequestEncodingType
from litestar.exceptions import NotFoundException
from litestar.params import Body, FromPath, FromQuery, QueryParameter
from litestar.response import Redirect, Response, Template

from agentrein_core.errors import InvalidTransitionError
from agentrein_core.read_models import ApprovalInfo
from agentrein_core.statuses import ApprovalStatus
from agentrein_server.dashboard import forms
from agentrein_server.dashboard.rendering import fingerprint, fragment, page, redirect, when
from agentrein_server.dashboard.viewer import ViewerDep
from agentrein_server.services import ServicesDep

#: Decided approvals shown under the pending ones, newest decision first.
RECENTLY_DECIDED = 20
#: Pending requests shown at first, those to decide first; "Show more" adds as many again, up to
#: :data:`MOST_SHOWN`. A card lists up to 20 undos per decision: a queue of thousands would make a page nobody
#: reads, and the page is read again every 2 s while it is open.
SHOWN_PENDING = 25
MOST_SHOWN = 1000
Shown = Annotated[int | None, QueryParameter(ge=1, le=MOST_SHOWN)]


class ApprovalPages(Controller):
    path = "/approvals"

    @get(sync_to_thread=True)
    def queue(
        self, request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep, shown: Shown = None
    ) -> Template:
        """The queue; ``shown``: how many pending requests it shows (``SHOWN_PENDING`` unless asked)."""
        listed = _queue(services, viewer.org_id, shown or SHOWN_PENDING)
        return page(request, "approvals.html", viewer, **listed)

    @get("/queue", sync_to_thread=True)
    def live(
        self, viewer: ViewerDep, services: ServicesDep, version: FromQuery[str] = "", shown: Shown = None
    ) -> Template | Response[None]:
        """The queue's list, or ``204 No Content`` when it is as the page last showed it (``version``)."""
        listed = _queue(services, viewer.org_id, shown or SHOWN_PENDING)
        if listed["version"] == version:
            return Response(None, status_code=204)
        return fragment("approval_list.html", viewer=viewer, **listed)

    @post("/{approval_id:str}/{decision:str}", sync_to_thread=True, status_code=200)
    def decide(
        self,
        approval_id: FromPath[str],
        decision: FromPath[str],
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        data: Annotated[forms.Decision, Body(media_type=RequestEncodingType.URL_ENCODED)],
    ) -> Template | Redirect:
        """``approve`` or ``reject``; then the request as it now stands (if someone else was first: who and
        when)."""
        if decision not in ("approve", "reject"):
            raise NotFoundException(f"no decision {decision!r}; approve or reject")
        return _decide(approval_id, request, viewer, services, data, approve=decision == "approve")


def _decide(
    approval_id: str,
    request: Request[Any, Any, Any],
    viewer: ViewerDep,
    services: ServicesDep,
    data: forms.Decision,
    *,
    approve: bool,
) -> Template | Redirect:
    verb = "approved" if approve else "rejected"
    try:
        services.decide(viewer.org_id, approval_id, viewer.email, forms.optional(data.reason), approve=approve)
        message, error = f"You {verb} this request.", False
    except InvalidTransitionError as conflict:
        info = services.engine.reviews.get_approval(viewer.org_id, approval_id)
        # Still pending: a concurrent change got in the way, and the decision can simply be tried again.
        message = str(conflict) if info.status is ApprovalStatus.PENDING else _already_decided(info)
        error = True
    info = services.engine.reviews.get_approval(viewer.org_id, approval_id)
    if request.headers.get("hx-request") != "true":
        return redirect(request, "/dashboard/approvals", message, error=error)
    return fragment("approval_card.html", viewer=viewer, approval=info, message=message, error=error)


def _already_decided(info: ApprovalInfo) -> str:
    if info.status is ApprovalStatus.EXPIRED:
        return f"This request had already expired at {when(info.resolved_at)}."
    return f"Already {info.status.lower()} by {info.resolved_by} at {when(info.resolved_at)}."


def _queue(services: ServicesDep, org_id: str, shown: int) -> dict[str, Any]:
    """What the queue's list shows: the ``shown`` pending requests to decide first, the latest decided, how
    many wait, how many more "Show more" shows, and the list's version."""
    pending, decided, waiting = services.engine.reviews.approval_queue(org_id, RECENTLY_DECIDED, shown)
    more = min(SHOWN_PENDING, waiting - len(pending), MOST_SHOWN - shown)
    listed = {"pending": pending, "decided": decided, "waiting": waiting, "shown": shown, "more": more}
    return {**listed, "version": _version(pending, decided, waiting)}


def _version(pending: list[ApprovalInfo], decided: list[ApprovalInfo], waiting: int) -> str:
    """Changes whenever the list would look different: a request arrives, is decided or turns unconfirmed,
    or what a decision does or did changes (another card of the session was decided, a rollback moved), or
    the agent stops waiting."""
    return fingerprint(
        str(waiting),
        *(
            f"{a.approval_id}:{a.status}:{a.unconfirmed}:{a.action_status}:{a.outcome}:{a.consequences}"
            f":{a.agent_stopped_waiting_at}"
            for a in [*pending, *decided]
        ),
    )
