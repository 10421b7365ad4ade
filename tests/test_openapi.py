"""The REST API's OpenAPI document against what the server answers: schemathesis runs every operation of
``/schema/openapi.json`` on a real server on 127.0.0.1 and checks each answer's status, content type, headers
and body against the document; and the document says what a reader needs (typed answers, problem+json errors,
closed bodies, who needs a key), served with its docs page from the server alone."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from serving import RunningServer, Tenant, is_loopback

from agentrein_core.statuses import Role

PROBLEM = "application/problem+json"
#: Test cases schemathesis makes per operation and phase: enough to reach every documented answer of an
#: operation given real ids, few enough that the run stays well under a minute.
EXAMPLES = 6
#: Every check but two, which judge the server's input rules rather than the document: positive_data_acceptance
#: (the server refuses, as documented with 400, what a schema cannot state: a blank name, a FAILED outcome with
#: a response, a connector's own settings) and negative_data_rejection (Litestar's decoder is lenient: it takes
#: ``0`` for false).
SKIPPED_CHECKS = "positive_data_acceptance,negative_data_rejection"
CHECKS = ["--checks", "all", "--exclude-checks", SKIPPED_CHECKS]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """No workers: nothing a fuzzed request leaves behind (a webhook, a verifier URL, an undo) is ever sent."""
    running = RunningServer(f"sqlite:///{tmp_path_factory.mktemp('openapi') / 'agentrein.db'}", run_workers=False)
    yield running
    running.stop()


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


@pytest.fixture
def api(tenant: Tenant) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}, timeout=30) as client:
        yield client


@pytest.fixture
def document(api: httpx.Client) -> dict[str, Any]:
    answer = api.get("/schema/openapi.json")
    assert answer.status_code == 200
    served: dict[str, Any] = answer.json()
    return served


def operations(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """This process (the server's) may connect to, and look up, loopback addresses only: anything else is
    refused before it is sent, and noted; the test asserts that nothing was."""
    attempted: list[str] = []
    connect, getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not is_loopback(str(address[0])):
            attempted.append(f"connect {address}")
            raise OSError(f"test: no connection to {address}")
        connect(sock, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not is_loopback(host.decode() if isinstance(host, bytes) else str(host)):
            attempted.append(f"lookup {host!r}")
            raise socket.gaierror(socket.EAI_NONAME, "test: no lookups of names off this machine")
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    yield attempted


def seeded_ids(server: RunningServer, tenant: Tenant, api: httpx.Client) -> dict[str, str]:
    """Real records for every path parameter, so each operation reaches its successful answers too: a
    session with a confirmed call, a call waiting to be confirmed and one held for approval; a policy; a
    webhook (on the discard port: it is never delivered, no worker runs); a key that may be revoked."""
    session_id = api.post("/sessions", json={"agentId": "fuzzed", "intent": "be fuzzed"}).json()["id"]
    call = {"connector": "http", "apiName": "POST /v1/things", "operationType": "CREATE", "payload": {"n": 1}}
    done = api.post(f"/sessions/{session_id}/actions", json=call).json()["action"]["actionId"]
    undo = {"type": "http-delete", "url": "http://127.0.0.1:9/v1/things/1"}
    confirmed = api.patch(f"/sessions/{session_id}/actions/{done}", json={"status": "SUCCESS", "undo": undo})
    assert confirmed.status_code == 200, confirmed.text
    waiting = api.post(f"/sessions/{session_id}/actions", json=call).json()["action"]["actionId"]
    held = api.post(f"/sessions/{session_id}/actions", json=call | {"requiresApproval": True}).json()
    policy = api.post("/policies", json={"name": "review deletes", "effect": "REQUIRE_APPROVAL"}).json()
    assert api.patch("/settings", json={"webhookHosts": ["127.0.0.1"]}).status_code == 200
    hook = api.post("/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["*"]}).json()
    key, _ = server.engine.accounts.create_api_key(tenant.org_id, Role.AGENT)
    return {
        "path.session_id": session_id,
        "path.action_id": waiting,
        "path.approval_id": held["approval"]["approvalId"],
        "path.policy_id": policy["policyId"],
        "path.webhook_id": hook["webhookId"],
        "path.key_id": key.key_id,
        "path.name": "http",
        # a long-poll would hold each case for up to a minute
        "query.wait": 0,
    }


def run_schemathesis(tenant: Tenant, parameters: dict[str, Any], folder: Path) -> subprocess.CompletedProcess[str]:
    config = folder / "schemathesis.toml"
    config.write_text("[parameters]\n" + "".join(f'"{name}" = {_toml(v)}\n' for name, v in parameters.items()))
    command = [Path(sys.executable).parent / "schemathesis", "--config-file", config, "--no-color", "run"]
    return subprocess.run(
        [
            *map(str, command),
            f"{tenant.url}/schema/openapi.json",
            "--header",
            f"Authorization: Bearer {tenant.key}",
            *CHECKS,
            "--max-examples",
            str(EXAMPLES),
            "--seed",
            "1",
            "--workers",
            "1",
            "--generation-database",
            "none",
            "--request-timeout",
            "10",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _toml(value: object) -> str:
    return str(value) if isinstance(value, int) else '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_every_operation_answers_as_the_openapi_document_says(
    server: RunningServer, tenant: Tenant, api: httpx.Client, loopback_only: list[str], tmp_path: Path
) -> None:
    run = run_schemathesis(tenant, seeded_ids(server, tenant, api), tmp_path)
    summary = run.stdout[run.stdout.find("SUMMARY") :]
    print(summary)  # the run's summary: operations, phases, failures, test cases
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"Tested: (\d+)", summary) and "Tested: 0" not in summary
    assert loopback_only == []


def test_every_answer_with_a_body_is_documented_by_a_model_of_its_own(document: dict[str, Any]) -> None:
    untyped = [
        name
        for name, operation in operations(document)
        for status, answer in operation["responses"].items()
        for media, content in (answer.get("content") or {}).items()
        if media == "application/json" and "$ref" not in str(content["schema"])
    ]
    assert untyped == []
    session = document["components"]["schemas"]["SessionInfo"]
    assert {"id", "agentId", "displayStatus", "createdAt", "actions", "approvals"} <= set(session["required"])
    assert session["properties"]["actions"]["items"] == {"$ref": "#/components/schemas/Action"}


def test_every_error_is_documented_as_problem_json(document: dict[str, Any]) -> None:
    errors = {
        f"{name} {status}": set(answer.get("content", {}))
        for name, operation in operations(document)
        for status, answer in operation["responses"].items()
        if int(status) >= 400
    }
    assert errors and {media for found in errors.values() for media in found} == {PROBLEM}
    problem = document["components"]["schemas"]["ProblemDetails"]
    assert sorted(problem["required"]) == ["detail", "status", "title", "type"]
    assert {"field", "kind", "id", "actionId", "policyName", "approvalId", "reason"} <= set(problem["properties"])
    documented = {name: set(operation["responses"]) for name, operation in operations(document)}
    assert {"401", "403", "404", "409"} <= documented["POST /sessions/{session_id}/actions"]


def test_every_error_is_documented_as_saying_whether_it_rolls_the_session_back(document: dict[str, Any]) -> None:
    problem = document["components"]["schemas"]["ProblemDetails"]
    assert problem["properties"]["rollsBack"] == {"oneOf": [{"type": "boolean"}]}


def test_request_bodies_are_documented_as_refusing_unknown_fields(document: dict[str, Any]) -> None:
    bodies = [
        content["schema"]["$ref"].rsplit("/", 1)[-1]
        for _, operation in operations(document)
        for content in operation.get("requestBody", {}).get("content", {}).values()
        if "$ref" in content["schema"]
    ]
    assert "NewSession" in bodies
    schemas = document["components"]["schemas"]
    assert {name: schemas[name].get("additionalProperties") for name in bodies} == dict.fromkeys(bodies, False)


def test_the_document_says_which_text_may_not_be_empty_how_short_a_timeout_may_be_and_what_a_cursor_is(
    document: dict[str, Any],
) -> None:
    schemas = document["components"]["schemas"]
    required_text = {
        (body, field): schemas[body]["properties"][field].get("minLength")
        for body, field in [("NewSession", "agentId"), ("NewAction", "apiName"), ("NewPolicy", "name")]
    }
    assert required_text == dict.fromkeys(required_text, 1)
    timeouts = [schemas[body]["properties"]["approvalTimeoutMs"] for body in ("NewAction", "NewPolicy")]
    assert [(t.get("minimum"), t.get("maximum")) for t in timeouts] == [(1, 365 * 24 * 3600 * 1000)] * 2
    for path in ("/sessions", "/approvals"):
        (cursor,) = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == "cursor"]
        assert "nextCursor" in cursor["description"] and cursor["schema"]["pattern"] == "^[A-Za-z0-9_-]+$"


def test_health_and_metrics_are_documented_as_answering_without_an_api_key(document: dict[str, Any]) -> None:
    security = {name: operation.get("security") for name, operation in operations(document)}
    assert security.pop("GET /healthz") is None
    assert {} in security.pop("GET /metrics")
    assert "security" not in document
    assert set(map(str, security.values())) == {str([{"apiKey": []}])}


def test_operations_have_readable_summaries_and_ids(document: dict[str, Any]) -> None:
    named = {name: (operation["operationId"], operation["summary"]) for name, operation in operations(document)}
    assert named["POST /sessions/{session_id}/complete"] == ("completeSession", "Complete a session")
    assert all(re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+)+", op_id) for op_id, _ in named.values()), named
    assert all(" " in summary for _, summary in named.values()), named


def test_the_docs_page_loads_its_script_and_style_from_the_server_itself(tenant: Tenant) -> None:
    page = httpx.get(f"{tenant.url}/schema")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    loaded = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert any(url.endswith(".js") for url in loaded) and any(url.endswith(".css") for url in loaded)
    for url in loaded:
        absolute = urljoin(str(page.url), url)
        assert urlsplit(absolute).netloc == urlsplit(tenant.url).netloc, url
        assert httpx.get(absolute).status_code == 200, url
