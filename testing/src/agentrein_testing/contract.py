"""A conformance suite for connector plugins: the behaviour AgentRein relies on, checked against your own fake.
Import it in your tests: ``from agentrein_testing import ConnectorContract, Sample``.

Subclass :class:`ConnectorContract` in your plugin's tests (the class name must start with ``Test`` for pytest to
collect it), describe your service's calls, and provide three fixtures: ``connector`` (your connector),
``client`` (a client of your service pointed at your local fake) and ``service`` (whatever your fake is: it is
passed back to the hooks below). AgentRein records on the plugin's ``agentrein_database_url`` (a SQLite file in
``tmp_path``; override that fixture to check on another database). Then implement the hooks::

    class TestTodoConnector(ConnectorContract):
        samples = (
            Sample(("add_item",), kwargs={"title": "milk"}, api_name="items.create",
                   operation_type=OperationType.CREATE, undo_type="todo-delete"),
            Sample(("get_item",), args=("i1",)),  # a read: passes through unrecorded
        )
        create = samples[0]
        transient_errors = (ConnectionError("reset"),)
        permanent_errors = (ValueError("no such list"),)
        secret = Sample(("add_item",), kwargs={"title": "x", "session_cookie": "s3cr3t"}, api_name="items.create",
                        operation_type=OperationType.CREATE)
        secret_value = "s3cr3t"

        def exists(self, service, result): return result.id in service.items
        def idempotency_keys(self, service): return [r.request_id for r in service.requests]
        def count(self, service): return len(service.items)
        def lose_next_answer(self, service): service.fail_after_next_create()

Every check makes real calls through your client to your fake (nothing of yours is mocked), and the last ones
go through AgentRein itself: a wrapped client records the create, and a rollback removes it from your fake.
Each write is also described by your connector's words hooks (``describe``, ``describe_undo``,
``foresee_undo``, ``target_host``), which must answer in words (the defaults do).
"""

from __future__ import annotations

import asyncio
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import attrs
from attrs import field, frozen

from agentrein import AgentRein
from agentrein_core.connector import Connector, PreparedCall, Undoable, hookimpl
from agentrein_core.model import UNDO_NONE, Action, UndoConfig
from agentrein_core.plugins import Connectors, installed_connectors, new_plugin_manager
from agentrein_core.statuses import ActionStatus, OperationType

__all__ = ["ConnectorContract", "Sample"]


@frozen
class Sample:
    """One call through the client: ``client.<path>(*args, **kwargs)``. For a write, the ``api_name`` and
    ``operation_type`` the connector must give it and, where it has one, the ``undo_type`` it must derive;
    ``api_name=None`` marks a read, which must pass through."""

    path: tuple[str, ...]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(factory=dict)
    api_name: str | None = None
    operation_type: OperationType | None = None
    undo_type: str | None = None

    def call_on(self, target: Any) -> Any:
        method: Callable[..., Any] = target
        for name in self.path:
            method = getattr(method, name)
        return method(*self.args, **self.kwargs)


class ConnectorContract(ABC):
    """The contract every connector keeps. Not collected by itself: subclass it as ``Test<Something>``."""

    #: The calls to classify (writes and reads).
    samples: ClassVar[tuple[Sample, ...]] = ()
    #: A write whose undo makes it disappear from the fake (a create, usually).
    create: ClassVar[Sample]
    #: Errors that are worth retrying with the same idempotency key, and errors that are not.
    transient_errors: ClassVar[tuple[BaseException, ...]] = ()
    permanent_errors: ClassVar[tuple[BaseException, ...]] = ()
    #: A write whose payload holds ``secret_value`` where the connector must redact it.
    secret: ClassVar[Sample | None] = None
    secret_value: ClassVar[str] = ""
    #: Whether the connector must be installed through the ``agentrein`` entry point (as shipped plugins are).
    installed: ClassVar[bool] = True

    # hooks the author implements (abstract: pytest names any one a subclass leaves out) ----------------------
    @abstractmethod
    def exists(self, service: Any, result: Any) -> bool:
        """Whether the object ``result`` (what the create returned) still exists on the fake."""

    @abstractmethod
    def idempotency_keys(self, service: Any) -> list[str | None]:
        """The idempotency keys the fake received, oldest first (``None`` for a request without one)."""

    @abstractmethod
    def count(self, service: Any) -> int:
        """How many objects of the kind ``create`` makes exist on the fake."""

    @abstractmethod
    def lose_next_answer(self, service: Any) -> None:
        """Make the fake apply the next ``create`` but lose its answer (a 5xx or a dropped connection after the
        effect), as a network does: the contract then checks that a retry makes nothing twice."""

    # the contract ----------------------------------------------------------------------------------------
    def test_the_connector_is_installed_through_the_entry_point(self, connector: Connector) -> None:
        if self.installed:
            assert connector.name in installed_connectors().names()

    def test_writes_are_named_and_classified_and_reads_pass_through(self, connector: Connector, client: Any) -> None:
        assert self.samples, "list the calls to check in `samples`"
        for sample in self.samples:
            prepared = self._described(connector, client, sample)
            if sample.api_name is None:
                assert prepared is None, f"{'.'.join(sample.path)} is a read but was recorded as {prepared}"
                continue
            assert prepared is not None, f"{'.'.join(sample.path)} was let through unrecorded"
            got, expected = (prepared.api_name, prepared.operation_type), (sample.api_name, sample.operation_type)
            assert got == expected, f"{'.'.join(sample.path)} was classified {got}, not {expected}"

    def test_a_write_carries_its_idempotency_key_on_every_attempt(
        self, connector: Connector, client: Any, service: Any
    ) -> None:
        key = f"contract-{uuid.uuid4().hex}"
        before = len(self.idempotency_keys(service))
        self._run(self._prepare(connector, client, self.create), key)
        sent = self.idempotency_keys(service)[before:]
        assert key in sent, f"the service never saw the key {key!r} (it saw {sent})"

    def test_every_write_derives_the_undo_it_should(self, connector: Connector, client: Any) -> None:
        for sample in self.samples:
            if sample.api_name is None or sample.undo_type is None:
                continue
            prepared = self._prepare(connector, client, sample)
            result = self._run(prepared, f"contract-{uuid.uuid4().hex}")
            undo = connector.undo_for(prepared, result, None)
            assert isinstance(undo, UndoConfig) and undo.type == sample.undo_type, (sample.api_name, undo)
            connector.check_undo(undo)  # what the server will accept from an agent

    def test_every_write_is_described_in_words_before_and_after_it_runs(
        self, connector: Connector, client: Any
    ) -> None:
        """What a reviewer reads: the action, where it goes, whether it can be undone (before it runs) and its
        undo (once it ran: the one it derives for the writes that have one, else why nothing is undone)."""
        for sample in self.samples:
            if sample.api_name is None:
                continue
            prepared = self._prepare(connector, client, sample)
            held = _recorded(connector, prepared)
            outlook = connector.foresee_undo(held)
            assert isinstance(outlook.undoable, Undoable), (sample.api_name, outlook)
            undone = attrs.evolve(held, status=ActionStatus.SUCCESS, undo=UndoConfig(UNDO_NONE))
            said = {"describe": connector.describe(held), "foresee_undo": outlook.how}
            said["describe_undo of none"] = connector.describe_undo(undone)
            if sample.undo_type is not None:
                result = self._run(prepared, f"contract-{uuid.uuid4().hex}")
                response = connector.record_result(prepared, result)
                ran = attrs.evolve(undone, response=response, undo=connector.undo_for(prepared, result, None))
                said |= {"describe once run": connector.describe(ran), "describe_undo": connector.describe_undo(ran)}
            for hook, words in said.items():
                assert isinstance(words, str) and words.strip(), f"{hook} of {sample.api_name} said {words!r}"
            host = connector.target_host(held)
            assert host is None or (isinstance(host, str) and host.strip()), (sample.api_name, host)

    def test_a_retry_after_a_lost_answer_makes_nothing_twice(
        self, connector: Connector, client: Any, service: Any, agentrein_database_url: str, agentrein_journal_path: Path
    ) -> None:
        before = self.count(service)
        keys_before = len(self.idempotency_keys(service))
        self.lose_next_answer(service)
        with _embedded(agentrein_database_url, agentrein_journal_path, connector) as agentrein:
            session = agentrein.new_session(agent_id="contract", intent="a lost answer")
            assert self.create.api_name is not None
            wrapped = agentrein.wrap(client, session, connector=connector.name, retryable=[self.create.api_name])
            result = self.create.call_on(wrapped)
            (action,) = agentrein.get_session(session).actions
        assert self.count(service) == before + 1, "the retry made the object a second time"
        assert self.exists(service, result)
        sent = [key for key in self.idempotency_keys(service)[keys_before:] if key is not None]
        assert sent and set(sent) == {action.idempotency_key}, f"attempts carried other keys: {sent}"

    def test_only_transient_errors_are_worth_retrying(self, connector: Connector) -> None:
        assert self.transient_errors and self.permanent_errors, "list errors of both kinds"
        for error in self.transient_errors:
            assert connector.is_transient(error), f"{error!r} should be retried"
        for error in self.permanent_errors:
            assert not connector.is_transient(error), f"{error!r} must not be retried"

    def test_secrets_never_reach_the_store(
        self, connector: Connector, client: Any, service: Any, agentrein_database_url: str, agentrein_journal_path: Path
    ) -> None:
        assert self.secret is not None and self.secret_value, "give a write whose payload holds a secret"
        with _embedded(agentrein_database_url, agentrein_journal_path, connector) as agentrein:
            session = agentrein.new_session(agent_id="contract", intent="secrets")
            self.secret.call_on(agentrein.wrap(client, session, connector=connector.name))
            actions = agentrein.get_session(session).actions
        assert actions, "the write holding the secret was not recorded"
        assert self.secret_value not in repr(actions)  # payload, response and undo alike

    def test_a_create_is_recorded_and_undone_by_a_rollback(
        self, connector: Connector, client: Any, service: Any, agentrein_database_url: str, agentrein_journal_path: Path
    ) -> None:
        with _embedded(agentrein_database_url, agentrein_journal_path, connector) as agentrein:
            session = agentrein.new_session(agent_id="contract", intent="create, then roll back")
            result = self.create.call_on(agentrein.wrap(client, session, connector=connector.name))
            assert self.exists(service, result), "the create did not reach the fake"
            rolled_back = agentrein.rollback_session(session)
        (action,) = rolled_back.actions
        assert action.status == "ROLLED_BACK"
        assert not self.exists(service, result), "the rollback did not remove what the create made"
        # A resumed rollback repeats the inverse whose outcome it lost: that must succeed and change nothing.
        assert action.undo is not None
        connector.run_undo(action.undo, client, action.undo_idempotency_key)
        assert not self.exists(service, result)

    # helpers -------------------------------------------------------------------------------------------------
    @staticmethod
    def _prepare(connector: Connector, client: Any, sample: Sample) -> PreparedCall:
        prepared = ConnectorContract._described(connector, client, sample)
        assert prepared is not None, f"{sample.api_name} was let through unrecorded"
        return prepared

    @staticmethod
    def _described(connector: Connector, client: Any, sample: Sample) -> PreparedCall | None:
        prepared = connector.prepare(client, sample.path, sample.args, dict(sample.kwargs))
        assert prepared is None or isinstance(prepared, PreparedCall), (
            "this kit checks connectors that describe a call without awaiting the service"
        )
        return prepared

    @staticmethod
    def _run(prepared: PreparedCall, key: str) -> Any:
        outcome = prepared.run(key)
        return asyncio.run(outcome) if prepared.is_async else outcome


def _recorded(connector: Connector, call: PreparedCall) -> Action:
    """The write-ahead record of ``call``, as a reader is given it (before the call runs)."""
    now = datetime.now(UTC)
    return Action(
        action_id="act_contract",
        session_id="ses_contract",
        org_id="contract",
        seq=1,
        connector=connector.name,
        api_name=call.api_name,
        operation_type=call.operation_type,
        payload=call.payload,
        status=ActionStatus.PENDING_APPROVAL,
        idempotency_key="contract-key",
        created_at=now,
        updated_at=now,
    )


def _embedded(database_url: str, journal_path: Path, connector: Connector) -> AgentRein:
    """AgentRein, embedded, wrapping with exactly the ``connector`` under test (not an installed namesake)."""

    class Plugin:
        @hookimpl
        def agentrein_register_connectors(self) -> list[Connector]:
            return [connector]

    manager = new_plugin_manager(load_entry_points=False)
    manager.register(Plugin())
    organisation = f"contract-{uuid.uuid4().hex[:8]}"
    return AgentRein(database_url, organisation=organisation, connectors=Connectors(manager), journal_path=journal_path)
