"""Where the server sends requests whose address an organisation or an agent chose (server-side undos with
the organisation's credentials, webhook deliveries, an organisation's own verifier): the http connector's
allowedHosts rule, public addresses only, and connections pinned to the address that was checked.

Names are answered by a stubbed resolver, and a guard refuses every connection outside 127.0.0.0/8 and [::1]
before it is made: no test reaches another address, even where the code under test would try.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import attrs
import httpx
import pytest
from attrs import define, field
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from peers import FakeModel, WebhookReceiver, eventually, operator
from serving import RunningServer, Tenant, rolled_back, session_with_a_created_order

from agentrein import ActionStatus
from agentrein_core import targets
from agentrein_core.connector import Connector, Setting, SettingKind, hookimpl
from agentrein_core.errors import ValidationError
from agentrein_core.model import JSON, UndoConfig
from agentrein_core.plugins import Connectors, new_plugin_manager
from agentrein_core.statuses import VerificationOutcome
from agentrein_core.targets import ALLOW_PRIVATE_ENV
from agentrein_github import GitHubConnector
from agentrein_stripe import StripeConnector
from agentrein_testing import FakeService

#: A public address that names answer with; nothing ever connects to it (the guard refuses first).
PUBLIC = "93.184.215.14"
#: Where nothing listens: a name that answers this after its first answer leads nowhere.
NOWHERE = "127.0.0.2"


@define
class Resolver:
    """``socket.getaddrinfo`` for chosen names: each asking takes the next of the name's answers (an address,
    or a tuple of them), the last one repeated; other names (IP literals among them) are resolved as usual.
    ``asked`` counts the askings."""

    real: Any
    answers: dict[str, list[str | tuple[str, ...]]] = field(factory=dict)
    asked: Counter[str] = field(factory=Counter)

    def answer(self, name: str, *answers: str | tuple[str, ...]) -> None:
        self.answers[name] = list(answers)
        self.asked[name] = 0

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in self.answers:
            found: list[Any] = self.real(host, port, *args, **kwargs)
            return found
        self.asked[name] += 1
        queue = self.answers[name]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, port))
            for a in ((answer,) if isinstance(answer, str) else answer)
        ]


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Resolver:
    stub = Resolver(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", stub)
    return stub


@pytest.fixture(autouse=True)
def outside(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every connection tried outside loopback, each refused before it was made."""
    tried: list[Any] = []
    connect = socket.socket.connect

    def loopback_only(sock: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and not ipaddress.ip_address(address[0].split("%", 1)[0]).is_loopback:
            tried.append(address)
            raise ConnectionRefusedError(f"the tests reach loopback only, not {address[0]}")
        connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    yield tried


def loopback_counts_as_public(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on private targets are refused, but 127.0.0.1 (where the fakes listen) counts as public: it
    stands in for a public address, which no test may reach. ``NOWHERE`` stays private."""
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    is_global = ipaddress.IPv4Address.is_global
    stand_in = ipaddress.IPv4Address("127.0.0.1")
    monkeypatch.setattr(
        ipaddress.IPv4Address, "is_global", property(lambda address: address == stand_in or is_global.fget(address))
    )


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


@pytest.fixture
def api(tenant: Tenant) -> Iterator[httpx.Client]:
    with operator(tenant) as client:
        yield client


def problem_of(response: httpx.Response, field: str = "config.allowedHosts") -> dict[str, Any]:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem: dict[str, Any] = response.json()
    assert problem["type"].endswith("/validation-error") and problem["field"] == field
    return problem


# what the http connector's allowedHosts may hold ----------------------------------------------------------


@pytest.mark.parametrize("pattern", ["*", "*:*", "*.*", "?*", "*:443", "*.com", "127.0.0.*", "*.0.0.1"])
def test_an_allowed_host_that_allows_every_host_or_a_range_of_addresses_is_refused(
    api: httpx.Client, pattern: str
) -> None:
    """Refused even where private targets are allowed (as in these tests): the rule is about the pattern."""
    before = api.get("/connectors/http").json()["config"]
    refused = api.put("/connectors/http", json={"enabled": True, "config": {"allowedHosts": [pattern]}})
    assert "allows too much" in problem_of(refused)["detail"]
    assert api.get("/connectors/http").json()["config"] == before


@pytest.mark.parametrize(
    ("pattern", "address"),
    [
        ("169.254.169.254", "169.254.169.254"),
        ("10.0.0.5", "10.0.0.5"),
        ("127.0.0.1:8080", "127.0.0.1"),
        ("[::1]:8080", "::1"),
        ("internal.rebound.test", "10.1.2.3"),
    ],
)
def test_an_allowed_host_on_a_private_address_is_refused_when_stored(
    api: httpx.Client, resolver: Resolver, monkeypatch: pytest.MonkeyPatch, pattern: str, address: str
) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    resolver.answer("internal.rebound.test", "10.1.2.3")
    before = api.get("/connectors/http").json()["config"]
    refused = api.put("/connectors/http", json={"enabled": True, "config": {"allowedHosts": [pattern]}})
    detail = problem_of(refused)["detail"]
    assert "private or local address" in detail and address in detail and ALLOW_PRIVATE_ENV in detail
    assert api.get("/connectors/http").json()["config"] == before


# the targets other connectors declare -------------------------------------------------------------------------

#: Each connector with a stored address: its setting, credentials, and an undo the server would run with them.
ADDRESSED = {
    "stripe": (
        "apiBase",
        {"apiKey": "sk_test_agentrein"},
        {"type": "stripe-delete", "resource": "customers", "id": "cus_1"},
    ),
    "github": (
        "baseUrl",
        {"token": "ghp_agentrein"},
        {"type": "github-close-issue", "repo": "octo/demo", "number": 1},
    ),
}


@pytest.mark.parametrize("connector", sorted(ADDRESSED))
@pytest.mark.parametrize("address", ["http://127.0.0.1:18204", "http://[::1]:18204/api/v3", "http://10.0.0.5"])
def test_a_connectors_api_address_on_a_private_address_is_refused_when_stored(
    api: httpx.Client, monkeypatch: pytest.MonkeyPatch, connector: str, address: str
) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    key, credentials, _ = ADDRESSED[connector]
    refused = api.put(
        f"/connectors/{connector}", json={"enabled": True, "config": {key: address}, "credentials": credentials}
    )
    detail = problem_of(refused, f"config.{key}")["detail"]
    assert "private or local address" in detail and ALLOW_PRIVATE_ENV in detail
    assert api.get(f"/connectors/{connector}").json()["enabled"] is False


@pytest.mark.parametrize("connector", sorted(ADDRESSED))
def test_a_rollback_sends_no_credentials_to_an_api_address_that_is_no_longer_allowed(
    api: httpx.Client, monkeypatch: pytest.MonkeyPatch, service: FakeService, connector: str
) -> None:
    """Stored while private targets were allowed; the server no longer allows them when the rollback runs."""
    key, credentials, undo = ADDRESSED[connector]
    settings = {"enabled": True, "config": {key: service.base_url}, "credentials": credentials}
    assert api.put(f"/connectors/{connector}", json=settings).status_code == 200
    session_id = api.post("/sessions", json={"agentId": "a", "intent": "tidy up"}).json()["id"]
    body = {"connector": connector, "apiName": "made.create", "operationType": "CREATE", "payload": {}}
    action_id = api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]["actionId"]
    confirmed = api.patch(
        f"/sessions/{session_id}/actions/{action_id}", json={"status": "SUCCESS", "response": {}, "undo": undo}
    )
    assert confirmed.status_code == 200, confirmed.text
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    (action,) = rolled_back(api, session_id)["actions"]
    assert action["status"] == ActionStatus.ROLLBACK_FAILED
    assert f"config.{key}" in action["error"] and "private or local address" in action["error"]
    assert ALLOW_PRIVATE_ENV in action["error"]
    assert service.calls() == []  # the fake stands at the stored address: it received nothing


@pytest.mark.parametrize(
    ("connector", "config", "credentials", "undo"),
    [
        (
            StripeConnector(),
            {"apiBase": "https://api.rebound.test"},
            {"apiKey": "sk_test_agentrein"},
            UndoConfig("stripe-delete", {"resource": "customers", "id": "cus_1"}),
        ),
        (
            GitHubConnector(),
            {"baseUrl": "https://api.rebound.test/api/v3"},
            {"token": "ghp_agentrein"},
            UndoConfig("github-close-issue", {"repo": "acme/web", "number": 1}),
        ),
    ],
    ids=["stripe", "github"],
)
def test_a_server_client_checks_the_address_of_its_api_as_it_connects(
    resolver: Resolver,
    outside: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    connector: Connector,
    config: JSON,
    credentials: JSON,
    undo: UndoConfig,
) -> None:
    """Checked when stored and before the undo, the API's name may still resolve elsewhere as it connects."""
    client = connector.server_client(config, credentials, "org_test")
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    resolver.answer("api.rebound.test", "10.0.0.5")
    (field,) = config
    with pytest.raises(ValidationError, match=rf"config\.{field}: .*private or local.*{ALLOW_PRIVATE_ENV}"):
        connector.run_undo(undo, client, "undo-key")
    assert outside == [] and resolver.asked["api.rebound.test"] == 1


class Reaching(Connector):
    """A third-party connector whose undos go where its settings say, and which checks none of them itself."""

    name: ClassVar[str] = "reaching"
    settings: ClassVar[tuple[Setting, ...]] = (
        Setting("token", "Token", "Sent with every undo.", secret=True),
        Setting("endpoint", "API address", "Where undos go.", SettingKind.URL),
        Setting("mirrors", "Mirrors", "Other hosts undos may go to.", SettingKind.HOSTS),
    )

    def prepare(self, client: Any, path: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        return None

    def check_config(self, config: JSON, credentials: JSON, org_id: str) -> None:
        pass  # it takes anything: the engine checks its targets all the same

    def server_client(self, config: JSON, credentials: JSON, org_id: str) -> httpx.Client:
        return httpx.Client(base_url=config["endpoint"], headers={"Authorization": credentials["token"]})


class ReachingPlugin:
    @hookimpl
    def agentrein_register_connectors(self) -> list[Connector]:
        return [Reaching()]


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"endpoint": "http://127.0.0.1:18204"}, "config.endpoint"),
        ({"endpoint": "https://api.example.com", "mirrors": ["169.254.169.254:80"]}, "config.mirrors"),
    ],
)
def test_the_targets_a_third_party_connector_declares_are_checked_by_the_engine_when_stored(
    server: RunningServer, tenant: Tenant, resolver: Resolver, monkeypatch: pytest.MonkeyPatch, config: JSON, field: str
) -> None:
    manager = new_plugin_manager(load_entry_points=False)
    manager.register(ReachingPlugin())
    configuration = attrs.evolve(server.services.configuration, connectors=Connectors(manager))
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    resolver.answer("api.example.com", PUBLIC)
    with pytest.raises(ValidationError) as refused:
        configuration.configure_connector(
            tenant.org_id, "reaching", enabled=True, config=config, credentials={"token": "t"}
        )
    assert refused.value.field == field and ALLOW_PRIVATE_ENV in str(refused.value)
    assert server.engine.accounts.connector_config(tenant.org_id, "reaching") is None


# server-side undos ------------------------------------------------------------------------------------------


def test_an_undo_to_a_host_that_now_resolves_to_a_private_address_is_refused_and_nothing_is_sent(
    api: httpx.Client, resolver: Resolver, outside: list[Any], monkeypatch: pytest.MonkeyPatch, service: FakeService
) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    resolver.answer("api.rebound.test", PUBLIC)
    stored = api.put(
        "/connectors/http",
        json={
            "enabled": True,
            "config": {"allowedHosts": ["api.rebound.test"]},
            "credentials": {"headers": {"Authorization": "Bearer sk_live_org"}},
        },
    )
    assert stored.status_code == 200, stored.text
    session_id, order_id = session_with_a_created_order(api, service, undo_base="http://api.rebound.test")
    resolver.answer("api.rebound.test", "10.0.0.5")
    session = rolled_back(api, session_id)
    (action,) = session["actions"]
    assert action["status"] == ActionStatus.ROLLBACK_FAILED and session["displayStatus"] == "ROLLBACK_FAILED"
    assert "private or local address (10.0.0.5)" in action["error"] and "api.rebound.test" in action["error"]
    assert outside == [] and service.calls("DELETE") == []
    assert order_id in service.collection("orders")


def test_an_undo_under_settings_stored_before_the_rule_that_allow_every_host_is_refused(
    server: RunningServer, tenant: Tenant, api: httpx.Client, service: FakeService
) -> None:
    everything = {"allowedHosts": ["*"]}
    server.engine.accounts.configure_connector(tenant.org_id, "http", enabled=True, config=everything, credentials=None)
    session_id, order_id = session_with_a_created_order(api, service)
    (action,) = rolled_back(api, session_id)["actions"]
    assert action["status"] == ActionStatus.ROLLBACK_FAILED
    assert "allowedHosts" in action["error"] and "allows too much" in action["error"]
    assert service.calls("DELETE") == [] and order_id in service.collection("orders")


def test_an_undo_connects_to_the_address_it_checked_under_the_name_it_was_given(
    api: httpx.Client, resolver: Resolver, monkeypatch: pytest.MonkeyPatch, service: FakeService
) -> None:
    port = httpx.URL(service.base_url).port
    allowed = {"allowedHosts": ["*.rebound.test"]}
    assert api.put("/connectors/http", json={"enabled": True, "config": allowed}).status_code == 200
    session_id, order_id = session_with_a_created_order(api, service, undo_base=f"http://orders.rebound.test:{port}")
    loopback_counts_as_public(monkeypatch)
    resolver.answer("orders.rebound.test", "127.0.0.1", NOWHERE)
    assert rolled_back(api, session_id)["displayStatus"] == "REVERTED"
    (undo,) = service.calls("DELETE")
    assert undo.host == f"orders.rebound.test:{port}"
    assert resolver.asked["orders.rebound.test"] == 1
    assert order_id not in service.collection("orders")


# webhook deliveries and organisations' verifiers ------------------------------------------------------------


def test_a_webhook_delivery_connects_to_the_address_it_checked_under_the_name_it_was_given(
    api: httpx.Client, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    with WebhookReceiver().running() as receiver:
        port = httpx.URL(receiver.url).port
        assert api.patch("/settings", json={"webhookHosts": ["hooks.rebound.test"]}).status_code == 200
        hook = {"url": f"http://hooks.rebound.test:{port}/hook", "events": ["approval.requested"]}
        made = api.post("/webhooks", json=hook)
        assert made.status_code == 201, made.text
        receiver.secret = made.json()["secret"]
        loopback_counts_as_public(monkeypatch)
        resolver.answer("hooks.rebound.test", "127.0.0.1", NOWHERE)
        session_id = api.post("/sessions", json={"agentId": "a", "intent": "refund"}).json()["id"]
        held = {"connector": "http", "apiName": "POST /v1/refunds", "operationType": "CREATE", "payload": {}}
        api.post(f"/sessions/{session_id}/actions", json={**held, "requiresApproval": True})
        (delivered,) = eventually(receiver.accepted, bool)
    assert delivered.headers["host"] == f"hooks.rebound.test:{port}"
    assert resolver.asked["hooks.rebound.test"] == 1


def test_an_organisations_verifier_is_asked_at_the_address_it_checked_under_the_name_it_was_given(
    api: httpx.Client, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeModel().running() as model:
        port = httpx.URL(model.url).port
        assert api.patch("/settings", json={"verifierUrl": f"http://model.rebound.test:{port}/v1"}).status_code == 200
        loopback_counts_as_public(monkeypatch)
        resolver.answer("model.rebound.test", "127.0.0.1", NOWHERE)
        session_id = api.post("/sessions", json={"agentId": "a", "intent": "send the email"}).json()["id"]
        body = {"connector": "http", "apiName": "POST /v1/emails", "operationType": "CREATE", "payload": {}}
        action_id = api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]["actionId"]
        api.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "SUCCESS", "response": {}})
        (checked,) = eventually(
            lambda: api.get(f"/sessions/{session_id}").json()["actions"],
            lambda actions: (actions[0].get("verification") or {}).get("outcome"),
        )
    assert checked["verification"]["outcome"] == VerificationOutcome.VERIFIED, checked["verification"]
    ((headers, _),) = model.requests
    assert headers["host"] == f"model.rebound.test:{port}"
    assert resolver.asked["model.rebound.test"] == 1


# the pinned client --------------------------------------------------------------------------------------------


def test_a_request_tries_each_checked_address_of_its_one_resolution_in_turn(
    resolver: Resolver, service: FakeService
) -> None:
    resolver.answer("twice.rebound.test", (NOWHERE, "127.0.0.1"), NOWHERE)
    with targets.pinned_client("url") as client:
        made = client.post(f"http://twice.rebound.test:{httpx.URL(service.base_url).port}/v1/orders", json={})
    assert made.status_code == 201 and resolver.asked["twice.rebound.test"] == 1


def test_a_request_is_refused_before_connecting_when_any_answer_for_its_host_is_private(
    resolver: Resolver, outside: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    resolver.answer("mixed.rebound.test", (PUBLIC, "10.0.0.5"))
    with targets.pinned_client("url") as client, pytest.raises(ValidationError, match=r"private or local.*10\.0\.0\.5"):
        client.post("https://mixed.rebound.test/hook", json={})
    assert outside == []


# TLS on the name ---------------------------------------------------------------------------------------------


def self_signed(name: str, folder: Path) -> tuple[Path, Path]:
    """A certificate for ``name`` (its own authority) and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def test_an_https_request_connects_to_the_checked_address_and_verifies_the_certificate_of_the_name(
    resolver: Resolver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cert_file, key_file = self_signed("secure.rebound.test", tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))  # the client trusts this certificate only
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    asked_for: list[str | None] = []
    context.sni_callback = lambda _socket, name, _context: asked_for.append(name)

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        resolver.answer("secure.rebound.test", "127.0.0.1", NOWHERE)
        with targets.pinned_client("url") as client:
            answer = client.get(f"https://secure.rebound.test:{server.server_address[1]}/")
    finally:
        server.shutdown()
        server.server_close()
    assert answer.status_code == 200
    assert asked_for == ["secure.rebound.test"] and resolver.asked["secure.rebound.test"] == 1
