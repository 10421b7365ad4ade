"""Sessions: a filterable, paginated list, and one session's timeline with its approvals and rollback.

Rolling back takes a confirmation that lists the undos in the order they will run (last action first), what
stays as it is, and what this server cannot undo and why (the executor's own obstacles); the session page then
follows the rollback live, polling a fragment until the job has ended."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from attrs import evolve, frozen
from litestar import Controller, Request, get, post
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Response, Template

from agentrein_core import rollback
from agentrein_core import wording as words
from agentrein_core.decisions import ActionWords
from agentrein_core.errors import AgentReinError, ValidationError
from agentrein_core.model import Action, Rollback
from agentrein_core.read_models import SessionInfo
from agentrein_core.rules import ROLLBACK_UNDER_WAY
from agentrein_core.settings_undo import Obstacle
from agentrein_core.statuses import DisplayStatus, Role, UndoStatus
from agentrein_server.dashboard.rendering import fingerprint, fragment, page, redirect
from agentrein_server.dashboard.viewer import ViewerDep, require_admin
from agentrein_server.services import Services, ServicesDep

PAGE_SIZE = 25
#: The actions a session's page shows at once; a link leads on to the next ones.
TIMELINE_PAGE = 100


@frozen
class PlannedUndo:
    """One step of the rollback an admin is asked to confirm: ``stays`` (the undo type is ``none``: the
    action stays as it is, and why), else what stops its undo on this server (``obstacle``), if anything."""

    action: Action
    stays: str = ""
    obstacle: Obstacle | None = None


class SessionPages(Controller):
    path = "/sessions"

    @get(sync_to_thread=True)
    def index(
        self,
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        display_status: FromQuery[str] = "",
        agent: FromQuery[str] = "",
        since: FromQuery[str] = "",
        until: FromQuery[str] = "",
        cursor: FromQuery[str] = "",
    ) -> Template:
        filters = {"display_status": display_status, "agent": agent.strip(), "since": since, "until": until}
        error = None
        try:
            found = services.engine.recording.list_sessions(
                viewer.org_id,
                PAGE_SIZE,
                display_status=display_status or None,
                agent_id=filters["agent"] or None,
                created_after=_moment("since", since),
                created_before=_moment("until", until),
                cursor=cursor or None,
            )
            sessions, next_cursor = found.sessions, found.next_cursor
        except ValidationError as err:
            sessions, next_cursor, error = [], None, str(err)
        under_review = services.engine.reviews.sessions_under_review(viewer.org_id, sessions)
        query = {k: v for k, v in filters.items() if v}
        return page(
            request,
            "sessions.html",
            viewer,
            sessions=sessions,
            under_review=under_review,
            filters=filters,
            statuses=list(DisplayStatus),
            error=error,
            first_page=urlencode(query),
            next_page=urlencode({**query, "cursor": next_cursor}) if next_cursor else None,
            paged=bool(cursor),
        )

    @get("/{session_id:str}", sync_to_thread=True)
    def show(
        self,
        session_id: FromPath[str],
        request: Request[Any, Any, Any],
        viewer: ViewerDep,
        services: ServicesDep,
        cursor: FromQuery[str] = "",
    ) -> Template:
        """The session, its timeline a page at a time (``cursor``: the page after the link's), and its latest
        rollback's progress."""
        view = _session_view(services, viewer.org_id, session_id, cursor)
        return page(request, "session.html", viewer, **view)

    @get("/{session_id:str}/rollback", sync_to_thread=True)
    def confirm_rollback(
        self, session_id: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Template:
        """What rolling back will do, for an admin to confirm."""
        require_admin(viewer)
        session = services.engine.recording.get_session(viewer.org_id, session_id)
        plan = _plan(services, viewer.org_id, session)
        blocked = [step for step in plan if step.obstacle is not None]
        said = _said(services, session.actions)
        return page(request, "rollback_confirm.html", viewer, session=session, undos=plan, blocked=blocked, said=said)

    @post("/{session_id:str}/rollback", sync_to_thread=True, status_code=303)
    def start_rollback(
        self, session_id: FromPath[str], request: Request[Any, Any, Any], viewer: ViewerDep, services: ServicesDep
    ) -> Redirect:
        require_admin(viewer)
        here = f"/dashboard/sessions/{session_id}"
        try:
            services.engine.rollbacks.request_rollback(
                viewer.org_id, session_id, caller_role=Role.OPERATOR, requested_by=viewer.email, trigger="dashboard"
            )
        except AgentReinError as err:
            services.engine.recording.get_session(
                viewer.org_id, session_id
            )  # an unknown session is a 404, not a message
            return redirect(request, here, f"Not rolled back: {err}", error=True)
        return redirect(request, here)  # the page follows the rollback itself, to its end

    @get("/{session_id:str}/live", sync_to_thread=True)
    def live(
        self, session_id: FromPath[str], viewer: ViewerDep, services: ServicesDep, version: FromQuery[str] = ""
    ) -> Template | Response[None]:
        """The session's body as it now stands, or 204 while it is as the page shows it (``version``). Polled
        while a rollback runs; the answer after the rollback has ended no longer polls."""
        view = _session_view(services, viewer.org_id, session_id)
        if view["version"] == version:
            return Response(None, status_code=204)
        return fragment("session_body.html", viewer=viewer, **view)


def _plan(services: Services, org_id: str, session: SessionInfo) -> list[PlannedUndo]:
    """The undos a rollback would run now, last action first, each with what keeps it from running here. A
    sandbox's rollback runs no inverse, so nothing can keep it from running."""
    planned = rollback.planned(session.actions)
    undone = [a for a in planned if not session.sandbox and not words.has_no_inverse(a)]
    obstacles = services.undo.obstacles(org_id, undone)
    plan = []
    for action in planned:
        if session.sandbox:
            plan.append(PlannedUndo(action))
        elif words.has_no_inverse(action):
            plan.append(PlannedUndo(action, stays=words.kept(action)))
        else:
            plan.append(PlannedUndo(action, obstacle=obstacles.get(action.action_id)))
    return plan


def _said(services: Services, actions: Iterable[Action]) -> dict[str, ActionWords]:
    """Each of ``actions`` in its connector's words (what it does, how it is undone), by action id: the wording
    the approvals page and the command line use too."""
    return {action.action_id: services.engine.reviews.words(action) for action in actions}


def _session_view(services: ServicesDep, org_id: str, session_id: str, cursor: str = "") -> dict[str, Any]:
    """A page of the session's timeline, and its latest rollback's progress, so that a long session's page costs
    what a short one's does."""
    recording = services.engine.recording
    session = recording.get_session(org_id, session_id, first_actions=TIMELINE_PAGE)
    if cursor:
        later = recording.action_page(org_id, session_id, TIMELINE_PAGE, cursor=cursor)
        session = evolve(session, actions=later.actions, actions_cursor=later.next_cursor)
    job = services.engine.rollbacks.latest_rollback(org_id, session_id)
    progress = _progress(services, org_id, job)
    under_way = progress is not None and progress["running"]
    return {
        "session": session,
        "said": _said(services, [*session.actions, *(progress["steps"] if progress else [])]),
        "progress": progress,
        "paged": bool(cursor),
        "can_roll_back": not under_way and services.engine.rollbacks.undos_left(org_id, session_id) > 0,
        "version": fingerprint(
            session.display_status,
            job.status if job else None,
            # The rollback's listed steps, and where the agent's process stands with an undo handed to it, which
            # changes no action (taken, its lease renewed).
            *(f"{a.action_id}:{a.status}:{a.undo_status}" for a in (progress["steps"] if progress else [])),
            *(
                f"{h.lease_id}:{h.leased_until}:{h.outcome}"
                for h in (progress["handoffs"].values() if progress else [])
            ),
            *(
                f"{a.status}:{a.undo_status}:{a.verification.outcome if a.verification else ''}"
                for a in session.actions
            ),
            session.verification.outcome if session.verification else None,
            *(a.status for a in session.approvals),
        ),
    }


def _progress(services: Services, org_id: str, job: Rollback | None) -> dict[str, Any] | None:
    """The latest rollback and the first steps of the chain it walks (last action first), with how many there
    are and how many it is through with, and where it handed an undo under way to the agent's process; None if
    there was none."""
    if job is None:
        return None
    earlier, steps = services.engine.rollbacks.steps_of(org_id, job, TIMELINE_PAGE)
    running = [a for a in steps.latest if a.undo_status is UndoStatus.IN_PROGRESS]
    handed = [services.engine.rollbacks.handoff_of(org_id, job, a.action_id) for a in running]
    return {
        "job": job,
        "steps": steps.latest,
        "handoffs": {h.action_id: h for h in handed if h is not None},
        "count": steps.count,
        "earlier": earlier,
        "more": steps.count - earlier - len(steps.latest),
        "finished": steps.through,
        "running": job.status in ROLLBACK_UNDER_WAY,
    }


def _moment(field: str, text: str) -> datetime | None:
    """A ``datetime-local`` field's value, taken as UTC."""
    if not text.strip():
        return None
    try:
        moment = datetime.fromisoformat(text.strip())
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValidationError(field, f"{text!r} is not a date and time like 2026-11-29T14:30") from None
