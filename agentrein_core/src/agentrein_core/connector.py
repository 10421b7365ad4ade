"""What a connector is: the one object a plugin gives AgentRein for each service it knows.

A connector answers five questions about its service, and the rest of AgentRein (recording, policies,
approvals, retries, rollback) is the same for every service:

1. *What is this call?* :meth:`Connector.prepare` turns a method called on the wrapped client into a
   :class:`PreparedCall` (canonical ``api_name``, operation type, payload), or ``None`` to let it through
   unrecorded (reads, helpers such as ``close()``).
2. *How is it made safe to retry?* :attr:`PreparedCall.run` receives the action's idempotency key and puts it
   where the service expects it; :meth:`Connector.is_transient` says which failures are worth retrying.
3. *How is it undone?* :meth:`Connector.undo_for` derives an :class:`UndoConfig` from the call and its
   result; :meth:`Connector.run_undo` runs it, with the undo's own idempotency key.
4. *What must never be stored?* :attr:`Connector.sensitive_fields` extends the default redaction list
   (:mod:`agentrein_core.redaction`). An undo's parameters are redacted too, and an undo left holding
   ``[REDACTED]`` is refused at rollback, so an undo must carry no secret: credentials come from
   :meth:`Connector.server_client`.
5. *What does it mean, in words?* Reviewers decide on what they read, so a connector says what a recorded
   action does (:meth:`Connector.describe`: "Delete order ord_14 on api.example.com", "Create Stripe customer
   ada@example.com"), what its recorded undo does (:meth:`Connector.describe_undo`: "Delete /v1/orders/ord_14
   on api.example.com", or why nothing is undone), where the call goes (:meth:`Connector.target_host`), and,
   before the call ran, whether its rules undo such a call (:meth:`Connector.foresee_undo`: yes, no, or "only
   with an undo the agent's code gives", which the server learns once the call ran). These read the stored
   record only (redacted, as any reader sees it), never the service; the defaults say what the record says.

:mod:`agentrein_core.runner` runs the calls and their inverses (keyed, retried, awaited) the same way for every
connector. In server mode inverses run in the server, through a client the connector builds from the
organisation's stored configuration and credentials (:meth:`Connector.server_client`, checked by
:meth:`Connector.check_config` when an operator stores them; both are given the organisation's id, for what the
server offers some organisations only: a plugin written before they took it, ``(config, credentials)``, is
still called that way, with a ``DeprecationWarning`` saying to add it). :attr:`Connector.settings` declares what those
take, one :class:`Setting` each (its key, type, help text, and whether it is a secret credential), so the
dashboard asks for them in a form and converts what is typed to the same ``config`` and ``credentials`` JSON
as ``PUT /connectors/{name}`` takes; ``check_config`` still judges the values. A setting of kind
:attr:`SettingKind.URL` (an address requests are sent to) or :attr:`SettingKind.HOSTS` (an allow-list of hosts)
is a *target*: the engine, not the connector, checks it (:func:`check_settings`, DESIGN §8) when the settings
are stored and again before each server-side undo, so a connector cannot lead the server's requests, and the
organisation's credentials, to a private address. Declare every address ``server_client`` reaches this way,
and an address inside a structured setting (an MCP server's URL in a map of servers) with
:meth:`Connector.targets`. A connector whose settings name some of its services only (each MCP server is one)
says which actions they reach (:meth:`Connector.not_reached`): the others are handed to the agent process that
holds the client, as every undo of a connector with no server side is. A connector without
``server_client`` has no server-side undo (:meth:`Connector.undoes_in_server`): its actions are undone by the
agent's own process, and the server's rollbacks say so before they start.

In embedded mode inverses run through the clients the agent wrapped, which the agent may have closed by the
time it rolls back (``with httpx.Client(...) as raw:``). An action is undone with the client that made it
while that one is open (:meth:`Connector.is_closed`); else with the newest open client the session wrapped for
the connector; else through a client :meth:`Connector.reopen` makes from the closed one (same service, same
credentials and settings), closed again once the inverse is through; and when the process holds no client
of the session for the connector, through the organisation's stored settings, as the server would. A client
with no closed state needs neither method: by default a client is never closed, and reopening gives it back
as it is.

**The plugin contract.** This module is the only one of ``agentrein_core`` a plugin imports from (the built-in
connectors too, as a third party's would; ``tests/test_layout.py`` holds them to it). It gives:

- registering: :data:`hookimpl`, the marker of ``agentrein_register_connectors()`` (entry-point group
  ``agentrein``);
- the connector: :class:`Connector`, :class:`PreparedCall`, :class:`Setting` and :class:`SettingKind`,
  :class:`Undoable` and :class:`UndoOutlook`; helpers :func:`merge_undo` (a caller's undo override),
  :func:`bind_call` (a call's arguments by name) and :func:`operation_by_verb` (the generic classification of a
  method by its name), and :data:`REQUIRE_APPROVAL_KEY`;
- the records it reads and derives: :class:`Action`, :class:`UndoConfig`, :data:`UNDO_NONE`, :data:`JSON`,
  :class:`OperationType`, :class:`ActionStatus`;
- the errors it raises: :class:`ValidationError` (bad input or settings, naming the field) and
  :class:`UndoError` (an inverse that failed);
- where its requests may go (:mod:`agentrein_core.targets`): :func:`pinned_client` (an httpx client that
  reaches public addresses only, at the address it checked), :func:`checked_addresses` (the same decision, for a
  transport of another HTTP library to connect with), :func:`host_entries` and :func:`host_allowed`
  (an allow-list of hosts and the check against it), :data:`HostEntry`, :data:`DEFAULT_PORTS`;
- :data:`REDACTED`, what a redacted value reads, and :class:`Redactor`, which redacts a value as the records of
  a connector's calls keep it (:attr:`Connector.redactor`): an undo derived from a value its record cannot keep
  would carry the marker; :func:`without_secrets` leaves such values out of a restore (naming them under
  :data:`NOT_RESTORED`, in a reviewer's words by :func:`secret_fields`).
"""

from __future__ import annotations

import functools
import inspect
import re
import warnings
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any, ClassVar

import pluggy
from attrs import frozen

from agentrein_core.errors import UndoError, ValidationError
from agentrein_core.model import JSON, UNDO_NONE, Action, UndoConfig
from agentrein_core.redaction import REDACTED, Redactor
from agentrein_core.statuses import ActionStatus, OperationType
from agentrein_core.targets import (
    DEFAULT_PORTS,
    HostEntry,
    check_allowed_hosts,
    check_target_url,
    checked_addresses,
    host_allowed,
    host_entries,
    pinned_client,
)

__all__ = [
    "DEFAULT_PORTS",
    "JSON",
    "NOT_RESTORED",
    "REDACTED",
    "REQUIRE_APPROVAL_KEY",
    "UNDO_NONE",
    "WHY_NOT_UNDONE",
    "Action",
    "ActionStatus",
    "Connector",
    "HostEntry",
    "OperationType",
    "PreparedCall",
    "Redactor",
    "Setting",
    "SettingKind",
    "UndoConfig",
    "UndoError",
    "UndoOutlook",
    "Undoable",
    "ValidationError",
    "bind_call",
    "checked_addresses",
    "hookimpl",
    "host_allowed",
    "host_entries",
    "merge_undo",
    "not_undone",
    "operation_by_verb",
    "pinned_client",
    "secret_fields",
    "without_secrets",
]

#: Marks a plugin's hook implementations. Here rather than beside the hook specifications
#: (:mod:`agentrein_core.hookspecs`, which names :class:`Connector`), so a plugin needs this module alone.
hookimpl = pluggy.HookimplMarker("agentrein")

#: The wire key of :attr:`UndoConfig.require_approval` in caller-supplied undo configs.
REQUIRE_APPROVAL_KEY = "requireApproval"


@frozen
class PreparedCall:
    """One intercepted call, described and ready to run.

    ``run(idempotency_key)`` makes the real call (every retry calls it again with the same key) and returns
    its result, or an awaitable of it when ``is_async``. ``context`` is the connector's own note for
    :meth:`Connector.undo_for` (the built request, say); AgentRein never reads it.
    """

    api_name: str
    operation_type: OperationType
    payload: JSON
    run: Callable[[str], Any]
    is_async: bool = False
    context: Any = None
    #: Whether running the call again cannot do it twice (the service honours the idempotency key, or the call
    #: is idempotent): only then is it retried, however the agent's ``retryable`` reads.
    retry_safe: bool = True


class SettingKind(StrEnum):
    """What a setting's JSON value is, and so how a form asks for it."""

    TEXT = "text"  #: a string
    URL = "url"  #: a string, the http(s) address requests are sent to: a target (:func:`check_settings`)
    LIST = "list"  #: a list of strings; a form takes one per line
    #: a list of hosts requests may be sent to (``host``, ``host:port``, ``[IPv6]:port``, ``*.domain``), one per
    #: line in a form: a target (:func:`check_settings`)
    HOSTS = "hosts"
    HEADERS = "headers"  #: an object of string values (HTTP headers); a form takes one ``Name: value`` per line
    #: a JSON object (a map of named things, say), typed as JSON in a form; a target it holds is declared by
    #: :meth:`Connector.targets`
    JSON = "json"


@frozen
class Setting:
    """One value a connector's :meth:`~Connector.check_config` and :meth:`~Connector.server_client` take.

    ``key`` is its key in ``config``, or in ``credentials`` when ``secret``: credentials are stored encrypted
    and never shown again, so a form never fills a secret back in, and leaving it empty keeps the stored one.
    ``help`` says what it is for and what it looks like; ``example`` is a sample value, as the form would take
    it (lists one per line)."""

    key: str
    label: str
    help: str
    kind: SettingKind = SettingKind.TEXT
    secret: bool = False
    required: bool = False
    example: str = ""

    @property
    def field(self) -> str:
        """The setting as :class:`~agentrein_core.errors.ValidationError` names it: ``config.allowedHosts``,
        ``credentials.apiKey``."""
        return f"{'credentials' if self.secret else 'config'}.{self.key}"


class Undoable(StrEnum):
    """Whether a call can be undone, as its connector's rules say before it runs."""

    YES = "YES"  # the rules derive an inverse for such a call
    NO = "NO"  # they derive none: once it runs, it stays
    UNKNOWN = "UNKNOWN"  # only an undo the agent's code gives, which the server learns once the call ran


@frozen
class UndoOutlook:
    """What undoing an action would take, in words (``how``: "Delete the customer it creates", or why it
    cannot be undone), and whether it can be undone at all."""

    undoable: Undoable
    how: str


class Connector(ABC):
    """Base class of connectors. Subclasses set :attr:`name` and override what their service needs."""

    #: The name agents pass as ``wrap(..., connector=NAME)``.
    name: ClassVar[str]
    #: Key fragments whose values are redacted, on top of ``redaction.DEFAULT_SENSITIVE_FIELDS``.
    sensitive_fields: ClassVar[frozenset[str]] = frozenset()
    #: The undo types this connector can run (``none`` is always understood).
    undo_types: ClassVar[frozenset[str]] = frozenset()
    #: What :meth:`check_config` and :meth:`server_client` take, declared for the dashboard's form: keys of
    #: ``config`` and, for secret ones, of ``credentials``. None: the dashboard asks for raw JSON instead.
    settings: ClassVar[tuple[Setting, ...]] = ()
    #: The keyword options of ``wrap()`` this connector takes for itself (``server=``, say), handed to
    #: :meth:`bind`. When it names ``undo``, ``wrap(undo=...)`` is the connector's own (an undo table) rather than
    #: api-name overrides.
    wrap_options: ClassVar[frozenset[str]] = frozenset()

    @functools.cached_property
    def redactor(self) -> Redactor:
        """How the records of this connector's calls are redacted (``Redactor(sensitive_fields)``): an undo
        derived from a value its record cannot keep would carry the marker (:func:`without_secrets`)."""
        return Redactor(self.sensitive_fields)

    def accepts(self, client: Any) -> bool:
        """Whether ``client`` is an object this connector knows how to wrap (checked by ``wrap()``)."""
        return True

    def bind(self, client: Any, options: Mapping[str, Any]) -> Any:
        """The wrapped ``client`` as this connector's other methods receive it (:meth:`prepare`, :meth:`run_undo`,
        :meth:`is_closed`, :meth:`reopen`), given the ``wrap()`` options named in :attr:`wrap_options` (only those
        the agent passed). Raise :class:`ValidationError` for a value it cannot use. By default the client itself."""
        return client

    def glob_matches(self, glob: str, api_name: str) -> bool:
        """Whether a glob of ``wrap(requires_approval=..., retryable=...)`` names ``api_name``. By default a
        glob over the whole api name."""
        return fnmatchcase(api_name, glob)

    @abstractmethod
    def prepare(
        self, client: Any, path: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> PreparedCall | Awaitable[PreparedCall | None] | None:
        """Describe the call ``client.<path>(*args, **kwargs)``, or return ``None`` to pass it through. For an
        async client whose calls cannot be described without asking the service (an MCP tool's annotations),
        an awaitable of either, awaited on the client's loop before anything is recorded."""

    def descend(self, value: Any) -> bool:
        """Whether an attribute value of the wrapped client is a service object to wrap in turn
        (``client.v1.customers``), rather than plain data. Nothing is descended into by default."""
        return False

    def recorded(self, path: tuple[str, ...], payload: Any, before: JSON | None = None) -> PreparedCall | None:
        """A call another client made and reports after it ran (the hosted product's published SDKs, through
        ``/compat``), named by the attribute path its code reached (``("customers", "create")`` for their
        ``stripe.customers.create``) with the ``payload`` it sent, and the object as it was just before the
        call (``before``) when the server read it. Described as :meth:`prepare` describes a call (api name,
        operation, payload, and the ``context`` :meth:`undo_for` then reads with the reported response), and
        never run. ``None`` (the default, and for a read): the call is recorded under its path, with no undo."""
        return None

    def read_before(self, call: PreparedCall, server_client: Callable[[], Any]) -> JSON | None:
        """The object ``call`` (described by :meth:`recorded`) is about to change, read through the client
        ``server_client()`` makes (your :meth:`server_client`, with the organisation's settings: call it only
        when there is something to read), for :meth:`recorded` to be given as ``before`` once the call is
        reported: what its undo restores. ``None`` (the default): its undo needs no before-state. Raise
        :class:`UndoError` saying why when it cannot be read."""
        return None

    def reads_before(self, call: PreparedCall) -> bool:
        """Whether :meth:`read_before` reads something for ``call`` (said without reading it): its undo restores
        the object as it was, so with nothing read before it ran, it has none. ``False`` (the default)."""
        return False

    def reported_changes(self) -> Iterable[tuple[str, ...]]:
        """The attribute paths, as the published SDKs name them, of the calls :meth:`recorded` describes that
        change an existing object (updates and deletes): the ``/compat`` registry tells their SDK, for each,
        whether to ask for its before-state (:meth:`reads_before`), so that it does not ask before every call.
        None by default (their SDK then asks before each, and is answered that nothing needs reading)."""
        return ()

    def record_result(self, call: PreparedCall, result: Any) -> JSON:
        """What to store of a successful call's result (redacted afterwards by AgentRein)."""
        return {}

    def failure_in(self, call: PreparedCall, result: Any) -> str | None:
        """Why ``result``, which the call returned rather than raised, is a failed call the agent reads as a
        result (an MCP tool's ``isError`` answer, when the agent chose to only record those): it is recorded
        ``FAILED`` and rolls nothing back. ``None`` (the default): the call succeeded."""
        return None

    def rolls_back(self, call: PreparedCall, error: BaseException) -> bool:
        """Whether ``call``, which raised ``error``, rolls the session back. ``False``: it is recorded ``FAILED``
        and nothing is rolled back, and the agent still gets ``error`` (an MCP server's JSON-RPC error, when the
        agent chose to only record tool errors). ``True`` (the default): a failed call rolls the session back."""
        return True

    def undo_for(self, call: PreparedCall, result: Any, override: Mapping[str, Any] | None) -> UndoConfig:
        """How to undo ``call`` now that it returned ``result``; ``override`` is the caller's
        ``wrap(undo={api_name: {...}})`` entry, if any. By default nothing can be undone."""
        return merge_undo(UndoConfig(UNDO_NONE), override)

    def is_transient(self, error: BaseException) -> bool:
        """Whether ``error`` is worth retrying with the same idempotency key."""
        return False

    def is_closed(self, client: Any) -> bool:
        """Whether ``client``, one the agent wrapped, can no longer send (the agent closed it). By default a
        client has no closed state."""
        return False

    def serves(self, client: Any, action: Action) -> bool:
        """Whether ``client`` (as :meth:`bind` made it) reaches the service ``action`` was made on, for a
        connector whose clients reach different services (each MCP server is one): an undo runs through a
        client of its own service only. By default every client of the connector does."""
        return True

    def reopen(self, client: Any) -> Any:
        """A client that reaches the service as the closed ``client`` did (its address, credentials and
        connection settings), to run an inverse through; AgentRein closes it after that inverse (``aclose()``
        or ``close()``). By default ``client`` itself, which :meth:`is_closed` never says is closed."""
        return client

    def run_undo(self, undo: UndoConfig, client: Any, idempotency_key: str) -> Any:
        """Run the inverse described by ``undo`` through ``client``. Return normally (or an awaitable) when
        the effect is gone, including when the service says it was already gone; raise otherwise."""
        raise ValidationError("undo", f"connector {self.name!r} cannot run undo type {undo.type!r}")

    def check_undo(self, undo: UndoConfig) -> None:
        """Reject, when an action is confirmed, an undo config this connector could not run (the config comes
        from the agent, so the server checks it before storing it)."""
        if not undo.is_none and undo.type not in self.undo_types:
            known = ", ".join(sorted({UNDO_NONE, *self.undo_types}))
            raise ValidationError("undo.type", f"{undo.type!r} is not an undo type of {self.name!r} ({known})")

    def check_config(self, config: JSON, credentials: JSON, org_id: str) -> None:
        """Reject settings (``PUT /connectors/{name}``) of organisation ``org_id`` that :meth:`server_client`
        could not use, naming the field at fault (:class:`ValidationError`): a value the server offers some
        organisations only (an MCP command its administrator declared for some) is judged for ``org_id``. By
        default a connector takes no settings."""
        for field, value in (("config", config), ("credentials", credentials)):
            if value:
                raise ValidationError(field, f"connector {self.name!r} takes no {field}")

    def server_client(self, config: JSON, credentials: JSON, org_id: str) -> Any:
        """A client through which the server runs this connector's inverses, built from the settings of
        organisation ``org_id`` (embedded mode too, when the process holds no client of the session), which
        reaches only what the server offers that organisation (judge it again: the server's own declarations,
        such as its MCP commands, may have changed since the settings were stored). Closed after use if it
        has ``aclose()`` or ``close()``. By default the connector has no server-side undo. Where an undo's
        address comes from the agent, use :func:`pinned_client`: it reaches public
        addresses only, at the address it checked."""
        raise UndoError(f"connector {self.name!r} cannot run inverses in the server")

    def undoes_in_server(self) -> bool:
        """Whether the server can run this connector's inverses: it overrides :meth:`server_client`."""
        return type(self).server_client is not Connector.server_client

    def targets(self, config: JSON, credentials: JSON) -> list[tuple[str, str]]:
        """The http(s) URLs, each with its field (``config.servers.tracker.url``), that the settings send requests
        to beyond those their :attr:`settings` declare as :attr:`SettingKind.URL`: an address inside a structured
        value. The engine checks each as a target (:func:`check_settings`). By default none."""
        return []

    def not_reached(self, config: JSON, action: Action) -> str | None:
        """Why the organisation's settings ``config`` (``{}`` when the connector is not enabled) do not reach the
        service ``action`` was made on, for a connector whose settings name its services one by one (each MCP
        server is one): its undo is then handed to the agent process that holds the client. ``None``: they do,
        or the connector's own checks will say why not. By default every action is reached."""
        return None

    def may_hand_over(self) -> bool:
        """Whether some undos of this connector are handed to the agent process that holds the client: it has
        no server side, or its settings may not reach every action (it overrides :meth:`not_reached`). An agent
        process takes the handed undos of such connectors."""
        return not self.undoes_in_server() or type(self).not_reached is not Connector.not_reached

    def describe(self, action: Action) -> str:
        """What ``action`` does, in plain words, for a reviewer: "Delete order ord_14 on api.example.com". By
        default its api name and kind."""
        return plain_description(action)

    def describe_undo(self, action: Action) -> str:
        """What the recorded undo of ``action`` (its ``undo``, known once the call ran) does, in the same words
        ("Delete /v1/orders/ord_14 on api.example.com"); for an undo of type ``none``, why nothing is undone.
        By default its type and parameters."""
        return plain_undo(action)

    def foresee_undo(self, action: Action) -> UndoOutlook:
        """Before the call ran (``action.undo`` is still unknown): whether this connector's rules undo such a
        call, and how, in words. Say :attr:`Undoable.UNKNOWN` where only the agent's code can give an undo.
        By default the connector does not say."""
        return UndoOutlook(
            Undoable.UNKNOWN, f"the {self.name} connector does not say; it is known once the call has run"
        )

    def target_host(self, action: Action) -> str | None:
        """The host the call goes to, when its record says (``api.example.com``); by default ``None``."""
        return None

    def check_undo_override(self, api_name_glob: str, override: Mapping[str, Any]) -> None:
        """Reject, at ``wrap()`` time, an undo override this connector could not run."""
        undo_type = override.get("type")
        if undo_type is not None and undo_type != UNDO_NONE and undo_type not in self.undo_types:
            known = ", ".join(sorted({UNDO_NONE, *self.undo_types}))
            raise ValidationError(
                f"undo[{api_name_glob!r}].type",
                f"{undo_type!r} is not an undo type of {self.name!r} ({known})",
            )
        flag = override.get(REQUIRE_APPROVAL_KEY, False)
        if not isinstance(flag, bool):
            raise ValidationError(f"undo[{api_name_glob!r}].{REQUIRE_APPROVAL_KEY}", "must be true or false")


def check_settings(connector: Connector, config: JSON, credentials: JSON, org_id: str) -> None:
    """Settings of ``connector`` for organisation ``org_id`` as the engine takes them, when they are stored
    (``PUT /connectors/{name}``, the dashboard's form, the command line) and again before each server-side
    undo: the connector's own
    :meth:`~Connector.check_config`, then every target it declares (a :attr:`~SettingKind.URL` or
    :attr:`~SettingKind.HOSTS` setting), which must reach public addresses only unless the server sets
    ``$AGENTREIN_ALLOW_PRIVATE_TARGETS`` to 1 (:mod:`agentrein_core.targets`), and every URL its
    :meth:`~Connector.targets` lists. Checked here rather than by each connector, so none can skip it."""
    _with_org_id(connector.check_config, config, credentials, org_id)
    for setting in connector.settings:
        value = (credentials if setting.secret else config).get(setting.key)
        if value is None:
            continue
        if setting.kind is SettingKind.URL:
            check_target_url(setting.field, value)
        elif setting.kind is SettingKind.HOSTS:
            check_allowed_hosts(setting.field, value)
    for field, url in connector.targets(config, credentials):
        check_target_url(field, url)


def open_server_client(connector: Connector, config: JSON, credentials: JSON, org_id: str) -> Any:
    """``connector``'s :meth:`~Connector.server_client` for organisation ``org_id``, called as
    :func:`check_settings` calls its ``check_config``."""
    return _with_org_id(connector.server_client, config, credentials, org_id)


def _with_org_id(method: Callable[..., Any], config: JSON, credentials: JSON, org_id: str) -> Any:
    """``method(config, credentials, org_id)``; for a plugin written to the contract before ``check_config`` and
    ``server_client`` took ``org_id`` (two arguments), ``method(config, credentials)`` with a DeprecationWarning
    saying what to add: it keeps working, judged alike for every organisation, rather than failing every
    request that stores its settings or undoes its calls with a TypeError."""
    parameters = _signature_of(method).parameters
    kinds = [parameter.kind for parameter in parameters.values()]
    positional = sum(
        kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for kind in kinds
    )
    if positional >= 3 or inspect.Parameter.VAR_POSITIONAL in kinds:
        return method(config, credentials, org_id)
    if "org_id" in parameters or inspect.Parameter.VAR_KEYWORD in kinds:  # ``*, org_id`` or ``**kwargs``
        return method(config, credentials, org_id=org_id)
    name = getattr(method, "__qualname__", repr(method))
    warnings.warn(
        f"{name} takes no org_id: connectors now take (config, credentials, org_id); add the organisation's id",
        DeprecationWarning,
        stacklevel=3,
    )
    return method(config, credentials)


def merge_undo(derived: UndoConfig, override: Mapping[str, Any] | None) -> UndoConfig:
    """Apply a caller's undo override: a different ``type`` replaces the derived config, other keys add to
    (or replace) its parameters, and ``requireApproval`` sets the approval flag either way."""
    if not override:
        return derived
    params = {k: v for k, v in override.items() if k not in ("type", REQUIRE_APPROVAL_KEY)}
    require_approval = bool(override.get(REQUIRE_APPROVAL_KEY, derived.require_approval))
    if "type" in override and override["type"] != derived.type:
        return UndoConfig(str(override["type"]), params, require_approval)
    return UndoConfig(derived.type, {**derived.params, **params}, require_approval)


#: The generic fallback of DESIGN §4: the first word of a method's name says what kind of call it is.
_VERBS: Mapping[str, OperationType] = {
    **dict.fromkeys(("create", "add", "post", "insert", "new"), OperationType.CREATE),
    **dict.fromkeys(
        ("update", "edit", "put", "patch", "modify", "set", "write", "move", "rename"), OperationType.UPDATE
    ),
    **dict.fromkeys(("delete", "del", "remove", "cancel", "close", "drop"), OperationType.DELETE),
    # Reads, narrowly: a read passes every policy unrecorded, so a name in doubt is left to OTHER (recorded).
    **dict.fromkeys(("get", "list", "retrieve", "search", "read"), OperationType.READ),
}
_FIRST_WORD = re.compile(r"[A-Za-z][a-z]*")


def operation_by_verb(name: str) -> OperationType:
    """What a method or tool named ``name`` does, by its first word (``create_entities``, ``deleteFile``,
    ``list-issues``): create/add/post/insert/new → CREATE, update/edit/put/patch/modify/set/write/move/rename →
    UPDATE, delete/del/remove/cancel/close/drop → DELETE, get/list/retrieve/search/read → READ, anything else →
    OTHER."""
    match = _FIRST_WORD.search(name)
    return _VERBS.get(match.group(0).lower(), OperationType.OTHER) if match else OperationType.OTHER


def bind_call(method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
    """``method``'s arguments bound to their names (what a connector records, and where it finds an id or a
    body however it was passed); :class:`ValidationError` when they do not fit the method. Each function's
    signature is read once (this runs on every recorded call)."""
    try:
        return _signature_of(method).bind(*args, **kwargs)
    except TypeError as exc:
        raise ValidationError("call", f"{getattr(method, '__qualname__', method)}: {exc}") from None


def _signature_of(method: Callable[..., Any]) -> inspect.Signature:
    """``method``'s signature as its callers see it (a bound method's without its first parameter), read once."""
    function = getattr(method, "__func__", None)
    return _signature(method) if function is None else _signature(function, bound=True)


@functools.lru_cache(maxsize=4096)
def _signature(function: Callable[..., Any], bound: bool = False) -> inspect.Signature:
    """``function``'s signature; ``bound``: as a method bound to an object has it (its first parameter gone)."""
    signature = inspect.signature(function)
    return signature.replace(parameters=list(signature.parameters.values())[1:]) if bound else signature


def plain_description(action: Action) -> str:
    """An action in the words its record gives, for a connector that has none of its own (or is not installed
    where it is read)."""
    return f"{action.api_name} (a {action.operation_type.lower()} call through {action.connector})"


#: The parameter of an undo ``none`` that says why nothing undoes the call (:func:`not_undone`).
WHY_NOT_UNDONE = "why"


def not_undone(why: str) -> UndoConfig:
    """An undo ``none`` that says ``why`` nothing undoes the call: reviewers read it wherever the action's undo
    is described (the dashboard, a review's consequences, the API's ``undo.why``), before any connector's words."""
    return UndoConfig(UNDO_NONE, {WHY_NOT_UNDONE: why})


def why_not_undone(undo: UndoConfig | None) -> str | None:
    """What :func:`not_undone` said, for an undo ``none`` that says it."""
    why = undo.params.get(WHY_NOT_UNDONE) if undo is not None and undo.is_none else None
    return why if isinstance(why, str) and why else None


#: The parameter of a restore that names what it leaves out because its record could not keep it (a secret).
NOT_RESTORED = "notRestored"


def without_secrets(fields: Mapping[str, Any], redactor: Redactor) -> tuple[JSON, list[str]]:
    """``fields`` (what a restore writes back) without those their record cannot keep: records are redacted, so
    restored as stored, the redaction marker would be written over the object's own value. The fields kept,
    and the names of those left out (for :data:`NOT_RESTORED`, and :func:`secret_fields` to say so)."""
    kept = {name: value for name, value in fields.items() if REDACTED not in repr(redactor.redact({name: value}))}
    return kept, [name for name in fields if name not in kept]


def secret_fields(names: Iterable[Any]) -> str:
    """What a restore leaves out (:func:`without_secrets`), in a reviewer's words."""
    return f"{', '.join(map(str, names))} held a secret, which AgentRein does not keep"


def plain_undo(action: Action) -> str:
    """An action's recorded undo in the words its record gives."""
    undo = action.undo
    if undo is None or undo.is_none:
        return why_not_undone(undo) or "no undo was recorded for it"
    params = ", ".join(f"{key}: {value}" for key, value in sorted(undo.params.items()))
    return f"{undo.type}" + (f" ({params})" if params else "")
