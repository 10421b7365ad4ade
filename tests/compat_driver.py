"""Drives the published AgentRein Python SDK (``agentrein`` 0.1.1, from contract/compat/requirements.txt) as an
agent would, in its own virtual environment: run as ``<venv>/bin/python -I compat_driver.py '<json>'``, it
plays one scenario and prints what the agent saw as one JSON line. It imports nothing of this repository (the
published package has our import name, ``agentrein``), and reaches 127.0.0.1 only: every other address is
refused before anything is sent, so a default hosted URL or telemetry would fail the scenario, not leave."""

from __future__ import annotations

import ipaddress
import json
import socket
import sys
from typing import Any

_connect = socket.socket.connect


def _loopback_only(sock: socket.socket, address: Any) -> Any:
    if isinstance(address, tuple) and not ipaddress.ip_address(str(address[0]).split("%", 1)[0]).is_loopback:
        raise ConnectionRefusedError(f"the published SDK tried to reach {address[0]}: only loopback is allowed")
    return _connect(sock, address)


socket.socket.connect = _loopback_only  # type: ignore[method-assign]

import httpx  # noqa: E402
import stripe  # noqa: E402

from agentrein import (  # noqa: E402
    AgentRein,
    AgentReinDeniedError,
    AgentReinUnavailableError,
    ApprovalRejectedError,
    ApprovalTimeoutError,
)

#: The api names the SDK asked ``precapture`` for, in order (what it sends the server, seen as it sends it).
PRECAPTURED: list[str] = []
_send = httpx.Client.send


def _noting_precaptures(client: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
    if request.url.path.endswith("/actions/precapture"):
        PRECAPTURED.append(json.loads(request.content)["apiName"])
    return _send(client, request, **kwargs)


httpx.Client.send = _noting_precaptures  # type: ignore[method-assign]


def main(args: dict[str, Any]) -> dict[str, Any]:
    ar = AgentRein(api_key=args["apiKey"], server_url=args["serverUrl"], failure_mode=args.get("failureMode", "open"))
    seen: dict[str, Any] = {}
    try:
        session = ar.new_session(agent_id="billing-agent", intent=args.get("intent", "onboard a customer"))
    except AgentReinUnavailableError as exc:
        return {"raised": "AgentReinUnavailableError", "message": str(exc)}
    seen["session"] = {"id": session.id, "status": session.status, "organizationId": session.organization_id}
    if args.get("module"):
        stripe.api_key, stripe.api_base = "sk_test_compat", args["stripeUrl"]
        client: Any = ar.wrap(stripe, session, connector="stripe")
        create = client.Customer.create
    else:
        real = stripe.StripeClient("sk_test_compat", base_addresses={"api": args["stripeUrl"]})
        held = args.get("requiresApproval")
        waits = {"requires_approval": held, "poll_interval_ms": 1000, "timeout_ms": args["timeoutMs"]} if held else {}
        client = ar.wrap(real, session, connector="stripe", **waits)
        create = client.v1.customers.create if args.get("v1", True) else client.customers.create
    try:
        if args.get("updateCustomer"):  # the id by name: passed positionally, their SDK would not send it
            client.v1.customers.update(customer=args["updateCustomer"], params={"email": "new@example.com"})
            return seen
        if args.get("createUpdateDelete"):  # what the SDK asks precapture for, once it has read /registry
            made = client.v1.customers.create(params={"email": "ada@example.com"})["id"]
            client.v1.customers.update(customer=made, params={"email": "new@example.com"})
            client.v1.customers.delete(customer=made)
            return {**seen, "precaptured": PRECAPTURED}
        customer = (
            create(email="ada@example.com") if args.get("module") else create(params={"email": "ada@example.com"})
        )
        seen["customer"] = customer["id"]
        if args.get("thenFail"):
            client.v1.customers.update(customer="cus_missing", params={"name": "Nobody"})
    except AgentReinDeniedError as exc:
        seen["raised"] = {
            "class": "AgentReinDeniedError",
            "status": exc.status,
            "type": exc.error_type,
            "detail": exc.detail,
        }
    except ApprovalRejectedError as exc:
        seen["raised"] = {"class": "ApprovalRejectedError", "reason": exc.reason}
    except ApprovalTimeoutError as exc:
        seen["raised"] = {"class": "ApprovalTimeoutError", "timeoutMs": exc.timeout_ms}
    except stripe.StripeError as exc:
        seen["raised"] = {"class": type(exc).__name__, "message": str(exc)}
    if args.get("complete"):
        ar.complete_session(session)
        seen["completed"] = ar.get_session(session.id).status
    return seen


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
