"""``agentrein serve`` as real processes: its first start, a crash in the middle of a rollback, two replicas
on one PostgreSQL racing for the same rollbacks, and one server of several processes (``--workers``). No
inverse is ever applied twice."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from dashboard import Visitor
from peers import WebhookReceiver, eventually
from serving import LOOPBACK_HTTP, ServerProcess

from agentrein import AgentRein, SessionInfo
from agentrein_testing import FakeService


@pytest.fixture
def secret_key() -> str:
    return Fernet.generate_key().decode()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'agentrein.db'}"


def operator(server: ServerProcess, key: str) -> httpx.Client:
    client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert client.put("/connectors/http", json={"enabled": True, "config": LOOPBACK_HTTP}).status_code == 200
    return client


def session_creating(ar: AgentRein, service: FakeService, orders: int) -> SessionInfo:
    session = ar.new_session(agent_id="agent", intent=f"create {orders} orders")
    client = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    for _ in range(orders):
        client.post("/v1/orders", json={})
    return session


def test_a_fresh_server_creates_the_default_organisation_and_prints_one_operator_key_once(
    sqlite_url: str, secret_key: str
) -> None:
    first = ServerProcess(sqlite_url, secret_key)
    try:
        (key,) = first.printed_keys
        printed = " ".join("".join(first.output).split())  # rich may wrap the long line
        assert "Created organisation 'default'" in printed
        assert operator(first, key).get("/sessions").status_code == 200
        sign_in = re.search(r"as (admin@localhost) with the password (\S+) ", printed)
        assert sign_in is not None
        dashboard = Visitor(first.url)
        dashboard.get("/dashboard/login")
        signed_in = dashboard.post("/dashboard/login", {"email": sign_in.group(1), "password": sign_in.group(2)})
        assert signed_in.status_code == 303
        assert "admin@localhost (admin)" in dashboard.get("/dashboard/users").text
        dashboard.close()
    finally:
        first.stop()
    again = ServerProcess(sqlite_url, secret_key)
    try:
        assert again.printed_keys == []
        assert operator(again, key).get("/sessions").status_code == 200
    finally:
        again.stop()


def test_a_server_killed_mid_rollback_finishes_it_after_restart_applying_nothing_twice(
    sqlite_url: str, secret_key: str, service: FakeService
) -> None:
    server = ServerProcess(sqlite_url, secret_key, lease_seconds=1)
    (key,) = server.printed_keys
    api = operator(server, key)
    ar = AgentRein(base_url=server.url, api_key=key)
    session = session_creating(ar, service, 3)
    orders = [a.response["body"]["id"] for a in ar.get_session(session).actions if a.response]
    ar.close()
    # The second undo (last first: orders[1]) reaches the service, which holds it; the server dies meanwhile.
    arrived, release = service.hold("DELETE", f"/v1/orders/{orders[1]}")
    assert api.post(f"/sessions/{session.id}/rollback", json={}).status_code == 202
    assert arrived.wait(timeout=30)
    server.kill()
    release.set()  # the held undo now takes effect, but the dead server never learns of it
    restarted = ServerProcess(sqlite_url, secret_key, lease_seconds=1)
    try:
        api = httpx.Client(base_url=restarted.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        job = api.get(f"/sessions/{session.id}/rollback", params={"wait": 30}).json()
        assert job["status"] == "SUCCEEDED"
        finished = api.get(f"/sessions/{session.id}").json()
    finally:
        restarted.stop()
    assert finished["displayStatus"] == "REVERTED"
    assert service.collection("orders") == {}
    deletes = service.calls("DELETE")
    assert [d.path.rsplit("/", 1)[1] for d in deletes] == [orders[2], orders[1], orders[1], orders[0]]
    # the repeated undo carried the same idempotency key, so the service replayed it instead of applying it
    assert deletes[1].idempotency_key == deletes[2].idempotency_key
    assert len({d.idempotency_key for d in deletes}) == 3


@pytest.fixture
def replicas(own_postgres_url: str, secret_key: str) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two servers on one new PostgreSQL database (one of them prints the default organisation's key)."""
    first = ServerProcess(own_postgres_url, secret_key)
    second = ServerProcess(own_postgres_url, secret_key)
    yield first, second
    first.stop()
    second.stop()


def test_two_replicas_racing_to_roll_back_the_same_50_sessions_run_each_undo_once(
    replicas: tuple[ServerProcess, ServerProcess], service: FakeService
) -> None:
    first, second = replicas
    (key,) = first.printed_keys + second.printed_keys  # only one of them created the default organisation
    apis = [operator(first, key), operator(second, key)]
    ar = AgentRein(base_url=first.url, api_key=key)
    sessions = [session_creating(ar, service, 2) for _ in range(50)]
    ar.close()
    for session in sessions:  # both replicas are asked to roll back every session
        for api in apis:
            assert api.post(f"/sessions/{session.id}/rollback", json={}).status_code in (202, 409)
    for n, session in enumerate(sessions):
        job = apis[n % 2].get(f"/sessions/{session.id}/rollback", params={"wait": 60}).json()
        assert job["status"] == "SUCCEEDED", job
    deletes = Counter(d.path for d in service.calls("DELETE"))
    assert len(deletes) == 100
    assert set(deletes.values()) == {1}
    assert service.collection("orders") == {}
    for api in apis:
        assert {s["displayStatus"] for s in api.get("/sessions", params={"limit": 100}).json()["sessions"]} == {
            "REVERTED"
        }


def test_a_long_poll_on_one_replica_wakes_when_a_reviewer_decides_on_the_other(
    replicas: tuple[ServerProcess, ServerProcess],
) -> None:
    first, second = replicas
    (key,) = first.printed_keys + second.printed_keys
    waiter, reviewer = (httpx.Client(base_url=r.url, headers={"Authorization": f"Bearer {key}"}) for r in replicas)
    session_id = waiter.post("/sessions", json={"agentId": "a"}).json()["id"]
    logged = waiter.post(
        f"/sessions/{session_id}/actions",
        json={"connector": "http", "apiName": "DELETE /x", "operationType": "DELETE", "requiresApproval": True},
    ).json()
    approval_id = logged["approval"]["approvalId"]
    answers: list[tuple[float, str]] = []

    def wait() -> None:
        answer = waiter.get(f"/approvals/{approval_id}", params={"wait": 30}, timeout=60).json()
        answers.append((time.monotonic(), answer["status"]))

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.5)
    decided_at = time.monotonic()
    assert reviewer.post(f"/approvals/{approval_id}/approve", json={}).status_code == 200
    thread.join(timeout=60)
    ((answered_at, status),) = answers
    assert status == "APPROVED"
    # Woken by PostgreSQL's NOTIFY: well before the replica's own 5 s re-check, let alone the 30 s wait.
    assert answered_at - decided_at < 2.5


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the processes from Linux's /proc")
def test_a_server_of_two_processes_expires_an_approval_once_delivers_its_webhook_once_and_stops_whole(
    sqlite_url: str, secret_key: str
) -> None:
    server = ServerProcess(sqlite_url, secret_key, workers=2)
    try:
        (key,) = server.printed_keys
        api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert api.patch("/settings", json={"webhookHosts": ["127.0.0.1"]}).status_code == 200
        with WebhookReceiver().running() as receiver:
            made = api.post("/webhooks", json={"url": receiver.url + "/hook", "events": ["approval.decided"]})
            hook = made.json()
            receiver.secret = hook["secret"]
            session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
            body = {"connector": "http", "apiName": "DELETE /x", "operationType": "DELETE", "requiresApproval": True}
            logged = api.post(f"/sessions/{session_id}/actions", json={**body, "approvalTimeoutMs": 200}).json()
            approval_id = logged["approval"]["approvalId"]
            eventually(lambda: receiver.accepted(), lambda got: len(got) == 1)
            time.sleep(3)  # several maintenance rounds: a second process doing the background work would act too
            assert len(receiver.received) == 1
        assert receiver.accepted()[0].headers["agentrein-event"] == "approval.decided"
        assert api.get(f"/approvals/{approval_id}").json()["status"] == "EXPIRED"
        assert len(api.get(f"/webhooks/{hook['webhookId']}/deliveries").json()) == 1
        processes = _children(server.process.pid)
        assert sum(_running(pid) for pid in processes) >= 2  # the two serving processes (and multiprocessing's)
    finally:
        server.stop()
    assert server.process.returncode == 0
    assert [pid for pid in processes if _running(pid)] == []


@pytest.mark.parametrize("workers", [1, 2])
def test_a_server_logs_a_line_per_request_only_when_started_with_access_log(
    sqlite_url: str, secret_key: str, workers: int
) -> None:
    quiet = ServerProcess(sqlite_url, secret_key, workers=workers)
    try:
        assert httpx.get(f"{quiet.url}/sessions").status_code == 401
    finally:
        quiet.stop()
    assert not any("/sessions" in line for line in quiet.output)
    logged = ServerProcess(sqlite_url, secret_key, workers=workers, options=["--access-log"])
    try:
        assert httpx.get(f"{logged.url}/sessions").status_code == 401
        output = eventually(lambda: list(logged.output), lambda out: any("/sessions" in line for line in out))
    finally:
        logged.stop()
    assert any('"GET /sessions HTTP/1.1" 401' in line for line in output)
