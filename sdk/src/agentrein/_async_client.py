"""``AsyncAgentRein``: the awaitable twin of :class:`~agentrein.AgentRein`, for agents that run on an event
loop. Every method is the same, awaited; its work runs in a worker thread (``asyncio.to_thread``), so the loop
never waits on AgentRein, and ``await ar.rollback_session(s)`` can run on an async client's own loop (its
inverses are awaited there while this coroutine waits)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from agentrein._client import AgentRein, SessionRef
from agentrein_core.model import DEFAULT_ORGANISATION, Policy
from agentrein_core.plugins import Connectors
from agentrein_core.read_models import ApprovalInfo, SessionInfo, SessionSummary
from agentrein_core.statuses import ApprovalStatus, PolicyEffect

T = TypeVar("T")


class AsyncAgentRein:
    """:class:`~agentrein.AgentRein` with awaitable methods; made with the same arguments. ``wrap()`` is not
    awaited: it returns the client, guarded, at once (an async client's calls are awaited as ever)."""

    def __init__(
        self,
        database_url: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        organisation: str = DEFAULT_ORGANISATION,
        connectors: Connectors | None = None,
        journal_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.sync = AgentRein(
            database_url,
            base_url=base_url,
            api_key=api_key,
            organisation=organisation,
            connectors=connectors,
            journal_path=journal_path,
        )
        """The synchronous :class:`~agentrein.AgentRein` underneath (for code that is not on the loop)."""

    @property
    def database_url(self) -> str | None:
        return self.sync.database_url

    @property
    def base_url(self) -> str | None:
        return self.sync.base_url

    async def new_session(
        self, agent_id: str, intent: str = "", sandbox: bool = False, *, failure_mode: str = "open"
    ) -> SessionInfo:
        return await asyncio.to_thread(self.sync.new_session, agent_id, intent, sandbox, failure_mode=failure_mode)

    async def get_session(self, session: SessionRef) -> SessionInfo:
        return await asyncio.to_thread(self.sync.get_session, session)

    async def list_sessions(self, limit: int = 100) -> list[SessionSummary]:
        return await asyncio.to_thread(self.sync.list_sessions, limit)

    async def complete_session(self, session: SessionRef) -> SessionInfo:
        return await asyncio.to_thread(self.sync.complete_session, session)

    async def rollback_session(self, session: SessionRef, *, timeout_ms: int | None = None) -> SessionInfo:
        return await asyncio.to_thread(self.sync.rollback_session, session, timeout_ms=timeout_ms)

    def wrap(
        self,
        client: T,
        session: SessionRef,
        *,
        connector: str,
        requires_approval: Iterable[str] = (),
        poll_interval_ms: int = 2000,
        timeout_ms: int = 300_000,
        retryable: Iterable[str] = (),
        failure_mode: str = "open",
        undo: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        **connector_options: Any,
    ) -> T:
        return self.sync.wrap(
            client,
            session,
            connector=connector,
            requires_approval=requires_approval,
            poll_interval_ms=poll_interval_ms,
            timeout_ms=timeout_ms,
            retryable=retryable,
            failure_mode=failure_mode,
            undo=undo,
            **connector_options,
        )

    async def list_approvals(self, status: ApprovalStatus | str | None = None) -> list[ApprovalInfo]:
        return await asyncio.to_thread(self.sync.list_approvals, status)

    async def get_approval(self, approval_id: str) -> ApprovalInfo:
        return await asyncio.to_thread(self.sync.get_approval, approval_id)

    async def approve(self, approval_id: str, reviewer: str | None = None, reason: str | None = None) -> ApprovalInfo:
        return await asyncio.to_thread(self.sync.approve, approval_id, reviewer, reason)

    async def reject(self, approval_id: str, reviewer: str | None = None, reason: str | None = None) -> ApprovalInfo:
        return await asyncio.to_thread(self.sync.reject, approval_id, reviewer, reason)

    async def add_policy(
        self,
        name: str,
        effect: PolicyEffect | str,
        *,
        connector: str | None = None,
        api_name: str | None = None,
        agent_id: str | None = None,
        operation_type: str | None = None,
        before_execution: bool = False,
        approval_timeout_ms: int | None = None,
    ) -> Policy:
        return await asyncio.to_thread(
            self.sync.add_policy,
            name,
            effect,
            connector=connector,
            api_name=api_name,
            agent_id=agent_id,
            operation_type=operation_type,
            before_execution=before_execution,
            approval_timeout_ms=approval_timeout_ms,
        )

    async def list_policies(self) -> list[Policy]:
        return await asyncio.to_thread(self.sync.list_policies)

    async def set_policy_enabled(self, policy_id: str, enabled: bool) -> Policy:
        return await asyncio.to_thread(self.sync.set_policy_enabled, policy_id, enabled)

    async def remove_policy(self, policy_id: str) -> None:
        await asyncio.to_thread(self.sync.remove_policy, policy_id)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncAgentRein:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()
