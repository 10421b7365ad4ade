"""The organisation's policies: ``ALLOW`` < ``REQUIRE_APPROVAL`` after execution < ``REQUIRE_APPROVAL`` before
execution < ``BLOCK``, the strictest match wins."""

from __future__ import annotations

import msgspec
from litestar import Controller, delete, get, patch, post
from litestar.params import FromPath, JSONBody

from agentrein_core.commands import NewPolicy
from agentrein_core.converter import to_wire
from agentrein_core.errors import ForbiddenError, NotFoundError, ValidationError
from agentrein_server.api import answers, bodies
from agentrein_server.problems import documented
from agentrein_server.services import CallerDep, ServicesDep


class PolicyController(Controller):
    path = "/policies"
    tags = ("policies",)

    @get(sync_to_thread=True, operation_id="listPolicies", summary="List policies", responses=documented())
    def list(self, caller: CallerDep, services: ServicesDep) -> answers.Policies:
        return to_wire(services.engine.policies.list_policies(caller.org_id))  # type: ignore[no-any-return]

    @post(
        sync_to_thread=True,
        operation_id="addPolicy",
        summary="Add a policy",
        responses=documented(ForbiddenError, body=True),
    )
    def create(self, data: JSONBody[bodies.NewPolicy], caller: CallerDep, services: ServicesDep) -> answers.Policy:
        """Each given glob (``connector``, ``apiName``, ``agentId``, ``operationType``) must match for the
        policy to apply. A ``REQUIRE_APPROVAL`` policy lets the call run and opens a review of it afterwards;
        with ``beforeExecution`` it holds the call (``PENDING_APPROVAL``) until a reviewer approves it, for
        ``approvalTimeoutMs`` or the agent's own timeout."""
        caller.require_operator("manage policies")
        # The body has the command's fields, camelCase on the wire.
        policy = services.engine.policies.add_policy(caller.org_id, NewPolicy(**msgspec.structs.asdict(data)))
        return to_wire(policy)  # type: ignore[no-any-return]

    @patch(
        "/{policy_id:str}",
        sync_to_thread=True,
        operation_id="enablePolicy",
        summary="Enable or disable a policy",
        responses=documented(ForbiddenError, NotFoundError, body=True),
    )
    def change(
        self, policy_id: FromPath[str], data: JSONBody[bodies.PolicyChange], caller: CallerDep, services: ServicesDep
    ) -> answers.Policy:
        caller.require_operator("manage policies")
        return to_wire(services.engine.policies.set_policy_enabled(caller.org_id, policy_id, data.enabled))  # type: ignore[no-any-return]

    @delete(
        "/{policy_id:str}",
        sync_to_thread=True,
        operation_id="deletePolicy",
        summary="Delete a policy",
        responses=documented(ValidationError, ForbiddenError, NotFoundError),
    )
    def remove(self, policy_id: FromPath[str], caller: CallerDep, services: ServicesDep) -> None:
        caller.require_operator("manage policies")
        services.engine.policies.delete_policy(caller.org_id, policy_id)
