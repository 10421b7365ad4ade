"""``agentrein demo``: a three-step onboarding agent whose fourth step fails, undone last-first."""

from __future__ import annotations

import httpx
from rich.console import Console
from rich.table import Table

from agentrein import AgentRein, SessionInfo
from agentrein_server.demo.fake_service import FakeService

STEPS: list[tuple[str, str, dict[str, object]]] = [
    ("Create the customer account", "/v1/customers", {"name": "ACME Corp", "email": "billing@acme.test"}),
    ("Start the subscription", "/v1/subscriptions", {"customer": "{customer}", "plan": "team"}),
    ("Open a welcome ticket", "/v1/tickets", {"customer": "{customer}", "subject": "Welcome aboard"}),
    ("Send the first invoice", "/v1/invoices", {"customer": "{customer}", "amount": 4900}),
]


def run_demo(database_url: str | None, console: Console) -> SessionInfo:
    service = FakeService(location_collections=frozenset({"tickets"}))
    with service.running():
        # The invoicing endpoint is down today: the fourth step fails.
        service.fail_next("POST", "/v1/invoices", status=500)
        ar = AgentRein(database_url)
        session = ar.new_session(
            agent_id="onboarding-agent",
            intent="Onboard ACME Corp: account, subscription, welcome ticket, first invoice",
        )
        console.print(f"[bold]Session[/] {session.id}  [dim]{ar.database_url}[/]")
        console.print(f"Fake service on {service.base_url}\n")
        api = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
        customer = ""
        for number, (title, path, body) in enumerate(STEPS, start=1):
            filled = {k: v.format(customer=customer) if isinstance(v, str) else v for k, v in body.items()}
            try:
                created = api.post(path, json=filled).json()
            except httpx.HTTPStatusError as exc:
                console.print(f"  [red]✗[/] step {number}: {title} — POST {path} answered {exc.response.status_code}")
                console.print("\n[bold]The run failed, so AgentRein rolled the session back, last step first:[/]")
                break
            customer = customer or created["id"]
            console.print(f"  [green]✓[/] step {number}: {title} — POST {path} → {created['id']}")
        for call in service.calls("DELETE"):
            console.print(f"  [yellow]↩[/] DELETE {call.path}")
        final = ar.get_session(session)
        console.print(actions_table(final))
        left = {c: len(service.collection(c)) for c in ("customers", "subscriptions", "tickets", "invoices")}
        console.print(f"Session status: [bold]{final.status}[/]   display status: [bold]{final.display_status}[/]")
        console.print("Left on the service: " + ", ".join(f"{n} {c}" for c, n in left.items()))
        ar.close()
        return final


def actions_table(session: SessionInfo) -> Table:
    table = Table(title=f"Actions of {session.id}")
    for column in ("seq", "api name", "operation", "status", "undo", "undo status"):
        table.add_column(column, no_wrap=True)
    for action in session.actions:
        undo = action.undo.type if action.undo else "—"
        colour = {"ROLLED_BACK": "yellow", "FAILED": "red", "SUCCESS": "green"}.get(action.status, "white")
        table.add_row(
            str(action.seq),
            action.api_name,
            action.operation_type,
            f"[{colour}]{action.status}[/]",
            undo,
            action.undo_status,
        )
    return table
