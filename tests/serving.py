"""A real AgentRein server on 127.0.0.1 for tests: the Litestar app under uvicorn in a thread, with its
workers, on a real database. Each test takes a :class:`Tenant` of its own (organisation + API key)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx
import uvicorn
from attrs import frozen
from cryptography.fernet import Fernet

from agentrein import AgentRein
from agentrein_core.plugins import Connectors
from agentrein_core.statuses import Plan, Role
from agentrein_core.vault import Vault
from agentrein_server.app import create_app, open_services
from agentrein_testing import FakeService

#: The http connector's settings that let the server undo calls made to the loopback fake service.
LOOPBACK_HTTP = {"allowedHosts": ["127.0.0.1"]}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, or ``localhost``) is this machine, where tests may send traffic."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return host == "localhost"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@frozen
class Tenant:
    org_id: str
    key: str
    url: str

    def client(self) -> AgentRein:
        return AgentRein(base_url=self.url, api_key=self.key)

    def native(self) -> httpx.Client:
        """The native API with the organisation's operator key (close it, or use it in a ``with``)."""
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.key}"}, timeout=60)


class RunningServer:
    def __init__(
        self,
        database_url: str,
        *,
        run_workers: bool = True,
        rollback_threads: int = 2,
        connectors: Connectors | None = None,
    ) -> None:
        self.services = open_services(
            database_url, rollback_threads=rollback_threads, vault=Vault(Fernet.generate_key()), connectors=connectors
        )
        self.engine = self.services.engine
        app = create_app(self.services, run_workers=run_workers)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="agentrein-test-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)

    def tenant(self, plan: Plan = Plan.TEAM, *, http_undo: bool = True) -> Tenant:
        """A new organisation with an operator key; ``http_undo`` enables server-side undo of loopback calls."""
        org = self.engine.accounts.create_organisation(f"test-{uuid.uuid4().hex[:10]}", plan)
        _, key = self.engine.accounts.create_api_key(org.org_id, Role.OPERATOR)
        if http_undo:
            self.engine.accounts.configure_connector(
                org.org_id, "http", enabled=True, config=LOOPBACK_HTTP, credentials=None
            )
        return Tenant(org.org_id, key, self.url)

    def tenant_undoing_with(self, connector: str, config: dict[str, Any], credentials: dict[str, Any]) -> Tenant:
        """A new organisation whose stored settings of ``connector`` (enabled) are these: the server's undos of
        its calls go where ``config`` says (a loopback fake)."""
        tenant = self.tenant()
        self.services.configuration.configure_connector(
            tenant.org_id, connector, enabled=True, config=config, credentials=credentials
        )
        return tenant

    def key(self, tenant: Tenant, role: Role) -> str:
        return self.engine.accounts.create_api_key(tenant.org_id, role)[1]

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)


def session_with_a_created_order(
    api: httpx.Client, service: FakeService, *, undo_base: str | None = None
) -> tuple[str, str]:
    """A session whose one action really created an order on the fake service; (session id, order id). Its
    undo deletes the order at ``undo_base`` (another name for the fake, say), else at the fake's own URL."""
    session_id = api.post("/sessions", json={"agentId": "billing", "intent": "orders"}).json()["id"]
    logged = api.post(
        f"/sessions/{session_id}/actions",
        json={"connector": "http", "apiName": "POST /v1/orders", "operationType": "CREATE", "payload": {}},
    ).json()
    order = httpx.post(f"{service.base_url}/v1/orders", json={}).json()
    undo = {"type": "http-delete", "url": f"{undo_base or service.base_url}/v1/orders/{order['id']}"}
    confirmed = api.patch(
        f"/sessions/{session_id}/actions/{logged['action']['actionId']}",
        json={"status": "SUCCESS", "response": {"id": order["id"]}, "undo": undo},
    )
    assert confirmed.status_code == 200, confirmed.text
    return session_id, order["id"]


def rolled_back(api: httpx.Client, session_id: str) -> dict[str, Any]:
    started = api.post(f"/sessions/{session_id}/rollback", json={})
    assert started.status_code == 202, started.text
    job = api.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()
    assert job["status"] in ("SUCCEEDED", "FAILED")
    session: dict[str, Any] = api.get(f"/sessions/{session_id}").json()
    return session


#: ``agentrein serve``, killed by Linux when the test process dies (prctl PR_SET_PDEATHSIG = 1): a test run that
#: is itself killed leaves no server behind.
SERVE_UNTIL_PARENT_DIES = (
    "import ctypes, signal, sys\n"
    "if sys.platform == 'linux':\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "from agentrein_cli.main import app\n"
    "app()"
)


def agent_outcome(agent: subprocess.Popen[str]) -> dict[str, Any]:
    """What an agent process (a published SDK's driver) saw, once its scenario has ended: its last line, JSON."""
    out, err = agent.communicate(timeout=300)
    assert agent.returncode == 0, err
    seen: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return seen


def pending_approval(native: httpx.Client, agent: subprocess.Popen[str]) -> dict[str, Any]:
    """The organisation's one pending approval, once the agent's call waits for it."""
    while not (pending := native.get("/approvals", params={"status": "PENDING"}).json()):
        assert agent.poll() is None, agent.communicate()
        threading.Event().wait(0.05)
    (approval,) = pending
    found: dict[str, Any] = approval
    return found


class ServerProcess:
    """``agentrein serve`` in a process of its own, which a test may kill (SIGKILL) as a crash would."""

    def __init__(
        self,
        database_url: str,
        secret_key: str,
        *,
        lease_seconds: float | None = None,
        workers: int = 1,
        port: int | None = None,
        options: Sequence[str] = (),
    ) -> None:
        self.port = port or free_port()  # a port of its own, or the one a stopped server answered on
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "AGENTREIN_SECRET_KEY": secret_key, "COLUMNS": "200"}
        if lease_seconds is not None:
            env["AGENTREIN_ROLLBACK_LEASE_SECONDS"] = str(lease_seconds)
        command = [sys.executable, "-c", SERVE_UNTIL_PARENT_DIES, "serve"]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port), "--database-url", database_url, "--workers", str(workers), *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.output: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + 90  # a loaded machine (two cores, many test processes) starts it slowly
        while True:
            if self.process.poll() is not None:
                raise RuntimeError("agentrein serve exited:\n" + "".join(self.output))
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                self.kill()  # no one holds this object to stop it: a server left running outlives the test run
                raise RuntimeError("agentrein serve did not answer:\n" + "".join(self.output))
            time.sleep(0.05)

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    @property
    def printed_keys(self) -> list[str]:
        return [line.strip() for line in self.output if line.startswith("ar_")]

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
