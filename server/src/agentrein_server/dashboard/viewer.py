"""Who is signed in to the dashboard: the user named by the encrypted session cookie, read afresh on every
request so that a removed user is signed out at once, and what their role lets them do."""

from __future__ import annotations

from typing import Any, TypeAlias

from attrs import frozen
from litestar import Request
from litestar.di import NamedDependency

from agentrein_core.errors import ForbiddenError, NotFoundError
from agentrein_core.model import User
from agentrein_core.statuses import UserRole
from agentrein_server.services import ServicesDep


class SignInRequired(Exception):
    """No one (or no longer anyone) is signed in: the dashboard answers with the sign-in page."""


@frozen
class Viewer:
    user: User

    @property
    def org_id(self) -> str:
        return self.user.org_id

    @property
    def email(self) -> str:
        return self.user.email

    @property
    def is_admin(self) -> bool:
        return self.user.role is UserRole.ADMIN


def provide_viewer(request: Request[Any, Any, Any], services: ServicesDep) -> Viewer:
    user_id, org_id = request.session.get("user_id"), request.session.get("org_id")
    if not isinstance(user_id, str) or not isinstance(org_id, str):
        raise SignInRequired
    try:
        return Viewer(services.engine.get_user(org_id, user_id))
    except NotFoundError:
        request.clear_session()
        raise SignInRequired from None


def require_admin(viewer: Viewer) -> Viewer:
    if not viewer.is_admin:
        raise ForbiddenError(f"{viewer.email} is a {viewer.user.role}; this is for admins")
    return viewer


def provide_member(signed_in: NamedDependency[Viewer]) -> Viewer:
    """The viewer of a page any signed-in user may see."""
    return signed_in


def provide_admin(signed_in: NamedDependency[Viewer]) -> Viewer:
    """The viewer of an admin page, who must be an admin."""
    return require_admin(signed_in)


ViewerDep: TypeAlias = NamedDependency[Viewer]
