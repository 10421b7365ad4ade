"""``agentrein demo``: an onboarding agent across Stripe and GitHub whose last step fails, undone last-first.

Both services are loopback fakes (:class:`FakeStripe`, :class:`FakeGitHub`) driven by the real ``stripe`` and
``PyGithub`` clients, wrapped by AgentRein's ``stripe`` and ``github`` connectors, in embedded mode. The agent
creates a Stripe customer and a subscription, opens a GitHub issue and comments on it; the comment fails (an
injected 500), so AgentRein marks it FAILED and undoes the rest in reverse: the issue is closed as not planned,
the subscription cancelled, the customer deleted. With ``approval=True`` the subscription waits for a human,
and the demo says how to approve it from another terminal (and approves it itself after ``approve_after``).
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any, TypeVar

import github
import stripe
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentrein import (
    AgentRein,
    AgentReinError,
    ApprovalPurpose,
    ApprovalRejectedError,
    ApprovalStatus,
    ApprovalTimeoutError,
    InvalidTransitionError,
    SessionInfo,
)
from agentrein_core.database import resolve_database_url, shown_database_url
from agentrein_core.plugins import installed_connectors
from agentrein_core.wording import words_of
from agentrein_testing.fakes.github import FakeGitHub, Recorded
from agentrein_testing.fakes.stripe import FakeStripe, StripeCall

T = TypeVar("T")

OWNER, REPO = "acme", "onboarding"
STRIPE_KEY = "sk_test_agentrein_demo"
GITHUB_TOKEN = "ghp_test"
#: The api name held for a human's approval with ``--approval``.
HELD = "subscriptions.create"
#: Who approves when nobody else does within ``approve_after`` seconds.
AUTO_REVIEWER = "agentrein-demo (auto)"
#: How long a human has to approve from another terminal (the command line alone takes seconds to start).
APPROVE_AFTER = 60.0


def run_demo(
    database_url: str | None, console: Console, *, approval: bool = False, approve_after: float = APPROVE_AFTER
) -> SessionInfo:
    """Run the onboarding agent against the fakes and show its rollback; the session as it ends.

    ``approval``: ``subscriptions.create`` waits for a human's approval; nobody deciding within
    ``approve_after`` seconds, the demo approves it itself."""
    wire = Wire()
    fake_stripe = FakeStripe(requests=wire.tap("Stripe"))
    fake_github = FakeGitHub(token=GITHUB_TOKEN, requests=wire.tap("GitHub"))
    fake_github.add_repo(OWNER, REPO, description="Customer onboarding")
    with fake_stripe.running(), fake_github.running():
        stripe_client = stripe.StripeClient(
            STRIPE_KEY, base_addresses={"api": fake_stripe.base_url}, max_network_retries=0
        )
        gh = github.Github(
            auth=github.Auth.Token(GITHUB_TOKEN),
            base_url=fake_github.base_url,
            retry=None,  # AgentRein's connector insists: PyGithub's own retries could open an issue twice
            seconds_between_requests=None,
            seconds_between_writes=None,
        )
        console.rule("[bold]AgentRein demo[/]: onboarding ACME Corp across Stripe and GitHub")
        console.print(f"Fake Stripe on {fake_stripe.base_url}, fake GitHub on {fake_github.base_url} (loopback only)")

        # The catalogue is the shop's, not the agent's: made with the plain client, before any wrapping, so
        # it is not part of the session and never undone.
        product = stripe_client.v1.products.create(params={"name": "Team plan"})
        price = stripe_client.v1.prices.create(
            params={"product": product.id, "unit_amount": 4900, "currency": "usd", "recurring": {"interval": "month"}}
        )
        console.print(
            f"Setup, not in the agent's session, so never undone: Stripe price {price.id} ($49/month, "
            f"'Team plan'), made with the unwrapped client; GitHub repository {OWNER}/{REPO}."
        )
        # GitHub's comment endpoint is having a bad day: the agent's last step fails.
        fake_github.fail_next("POST", f"/repos/{OWNER}/{REPO}/issues/*/comments", status=500)
        console.print("[dim]Fault injected: the fake GitHub answers the next issue comment with 500.[/]")

        # Embedded, always: a URL (given, $AGENTREIN_DATABASE_URL or the default) keeps $AGENTREIN_URL out of it.
        ar = AgentRein(resolve_database_url(database_url))
        try:
            session = ar.new_session(
                agent_id="onboarding-agent",
                intent="Onboard ACME Corp: Stripe customer and subscription, GitHub issue and comment",
            )
            console.print(f"\n[bold]Session[/] {session.id}  [dim]{ar.database_url}[/]")
            wait = approve_after + 60  # the approval's own timeout, well past the demo's auto-approval
            billing = ar.wrap(
                stripe_client,
                session,
                connector="stripe",
                requires_approval=[HELD] if approval else [],
                poll_interval_ms=100,
                timeout_ms=int(wait * 1000),
            )
            repos = ar.wrap(gh, session, connector="github")
            reviewer = Reviewer(ar, session.id, console, approve_after) if approval else None
            if reviewer is not None:
                console.print(f"[dim]--approval: {HELD} waits for a reviewer.[/]")
                reviewer.start()
            agent = Agent(console, wire, ar, session.id)
            try:
                agent.run(billing, repos, price.id)
            finally:
                if reviewer is not None:
                    reviewer.stop.set()
                    reviewer.join()
            final = ar.get_session(session)
            _show_outcome(console, final, agent, wire, fake_stripe, fake_github, ar.database_url)
            return final
        finally:
            ar.close()


class Agent:
    """The onboarding agent: four steps, each printed as it ends."""

    def __init__(self, console: Console, wire: Wire, ar: AgentRein, session_id: str) -> None:
        self.console = console
        self.wire = wire
        self.ar = ar
        self.session_id = session_id
        self.step = 0
        self.label = ""
        self.failed_at: int | None = None  # the wire position where the failing step started
        self.completed = False

    def run(self, billing: stripe.StripeClient, repos: github.Github, price_id: str) -> None:
        try:
            customer = self._do(
                "Stripe",
                "customers.create",
                lambda: billing.v1.customers.create(
                    params={"name": "ACME Corp", "email": "billing@acme.test", "source": "tok_visa"}
                ),
            )
            self._done(f"{customer.id} (ACME Corp, card on file)")
            subscription = self._do(
                "Stripe",
                "subscriptions.create",
                lambda: billing.v1.subscriptions.create(
                    params={"customer": customer.id, "items": [{"price": price_id}]}
                ),
            )
            self._done(f"{subscription.id} ({subscription.status}{self._approved()})")
            repo = repos.get_repo(f"{OWNER}/{REPO}")  # a read: passes through unrecorded
            issue = self._do(
                "GitHub",
                "issues.create",
                lambda: repo.create_issue(
                    title="Onboard ACME Corp",
                    body=f"Stripe customer {customer.id}, subscription {subscription.id}.",
                ),
            )
            self._done(f"{OWNER}/{REPO}#{issue.number} 'Onboard ACME Corp'")
            self._do(
                "GitHub",
                "issues.comments.create",
                lambda: issue.create_comment("Welcome aboard! Kick-off call booked for Monday."),
            )
            self._done(f"a comment on {OWNER}/{REPO}#{issue.number}")
            self.completed = True
        except ApprovalRejectedError as exc:
            because = f" ({exc.reason})" if exc.reason else ""
            self._failed(f"approval rejected{because}; nothing was charged, and AgentRein rolled the session back")
        except ApprovalTimeoutError:
            self._failed("nobody approved in time; AgentRein rolled the session back")
        except (stripe.StripeError, github.GithubException) as exc:
            self._failed(_service_error(exc))

    def _do(self, service: str, api_name: str, call: Callable[[], T]) -> T:
        self.step += 1
        self.failed_at = len(self.wire)
        self.label = f"{self.step}  {service:<6}  {api_name:<22}"
        return call()

    def _approved(self) -> str:
        """Who approved the step that just ran, if it was held for approval."""
        for approval in self.ar.get_session(self.session_id).approvals:
            if approval.purpose is ApprovalPurpose.BEFORE_EXECUTION and approval.status is ApprovalStatus.APPROVED:
                return f", approved by {approval.resolved_by}"
        return ""

    def _done(self, what: str) -> None:
        self.console.print(f"  [green]✓[/] {self.label}  {escape(what)}")

    def _failed(self, why: str) -> None:
        self.console.print(f"  [red]✗[/] {self.label}  [red]{escape(why)}[/]")


def _service_error(exc: BaseException) -> str:
    """``GithubException: HTTP 500 Internal Server Error`` rather than the whole error body."""
    status = getattr(exc, "status", None) or getattr(exc, "http_status", None)
    if not isinstance(status, int):
        return f"{type(exc).__name__}: {exc}"
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    return f"{type(exc).__name__}: {status} {reason}".rstrip()


class Reviewer(threading.Thread):
    """Stands in for the human: shows where to approve the held step, and approves it after ``approve_after``
    seconds when nobody else has decided."""

    def __init__(self, ar: AgentRein, session_id: str, console: Console, approve_after: float) -> None:
        super().__init__(name="agentrein-demo-reviewer", daemon=True)
        self.ar = ar
        self.session_id = session_id
        self.console = console
        self.approve_after = approve_after
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            self._review()
        except AgentReinError as exc:
            self.console.print(f"[red]error:[/] the demo's reviewer stopped: {exc}")

    def _review(self) -> None:
        approval_id = self._pending()
        if approval_id is None:
            return
        command = agentrein_command("approvals", "approve", approval_id, database_url=str(self.ar.database_url))
        self.console.print(
            f"  [yellow]⏸[/] {HELD} waits for approval [bold]{approval_id}[/]. Approve it from another terminal:"
        )
        self.console.print(f"      [bold cyan]{escape(shlex.join(command))}[/]", soft_wrap=True)
        self.console.print(
            f"    [dim](`approvals reject` instead rolls the session back.) If nobody decides within "
            f"{self.approve_after:g} s, the demo approves it itself.[/]"
        )
        deadline = time.monotonic() + self.approve_after
        while time.monotonic() < deadline:
            if self.stop.wait(0.1) or self.ar.get_approval(approval_id).status is not ApprovalStatus.PENDING:
                return  # decided by someone else: the agent goes on, and says how
        # The agent waits for the approval below, so this line comes before its next one.
        self.console.print(
            f"    Nobody decided within {self.approve_after:g} s: the demo approves it as {AUTO_REVIEWER}."
        )
        try:
            self.ar.approve(approval_id, reviewer=AUTO_REVIEWER, reason=f"nobody decided in {self.approve_after:g} s")
        except InvalidTransitionError:
            self.console.print("    (someone else decided first)")

    def _pending(self) -> str | None:
        """The id of the session's first approval before execution, once there is one."""
        while not self.stop.is_set():
            for approval in self.ar.get_session(self.session_id).approvals:
                if approval.purpose is ApprovalPurpose.BEFORE_EXECUTION:
                    return approval.approval_id
            self.stop.wait(0.05)
        return None


def _show_outcome(
    console: Console,
    session: SessionInfo,
    agent: Agent,
    wire: Wire,
    stripe_fake: FakeStripe,
    github_fake: FakeGitHub,
    database_url: str | None,
) -> None:
    if agent.completed:
        console.print("\nThe run succeeded; nothing was rolled back.")
    else:
        console.print("\n[bold]The run failed, so AgentRein rolled the session back, last step first.[/]")
        console.print("What the fakes received from then on, in order:")
        for service, call in wire.since(agent.failed_at or 0):
            mark = "[yellow]↩[/]" if call.status and call.status < 400 else "[red]✗[/]"
            console.print(f"  {mark} {service:<6}  {_describe_call(call)}", soft_wrap=True)
    console.print(rollback_table(session))
    console.print(f"Session status: [bold]{session.status}[/]   display status: [bold]{session.display_status}[/]")
    customers = len(stripe_fake.objects("customer"))
    subscriptions = [s["status"] for s in stripe_fake.objects("subscription")]
    active = sum(status not in ("canceled", "incomplete_expired") for status in subscriptions)
    open_issues = len(github_fake.issues(OWNER, REPO, state="open"))
    console.print(
        f"Left on the services: Stripe: {_count(customers, 'customer')}, "
        f"{_count(active, 'active subscription')}; GitHub: {_count(open_issues, 'open issue')}"
    )
    canceled = subscriptions.count("canceled")
    closed = len(github_fake.issues(OWNER, REPO, state="closed"))
    if canceled or closed:
        console.print(
            f"[dim]Kept on record, as the real services keep them: {_count(canceled, 'canceled subscription')}, "
            f"{_count(closed, 'closed issue')}.[/]"
        )
    show = agentrein_command("sessions", "show", session.id, database_url=str(database_url))
    console.print(f"[dim]See the session again: {escape(shlex.join(show))}[/]", soft_wrap=True)


def agentrein_command(*args: str, database_url: str) -> list[str]:
    """A command line that works from any directory: the ``agentrein`` beside this interpreter (``uv run``
    finds it only in the project), and the database by its absolute path."""
    here = shutil.which("agentrein", path=str(Path(sys.executable).parent)) or "agentrein"
    return [here, *args, "--database-url", shown_database_url(database_url)]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _describe_call(call: StripeCall | Recorded) -> str:
    body = call.params if isinstance(call, StripeCall) else call.body
    shown = f" {json.dumps(body)}" if body and call.method != "POST" else ""  # a PATCH's fields; a create's are above
    return f"{call.method} {call.path}{escape(shown)} → {call.status if call.status is not None else 'dropped'}"


def rollback_table(session: SessionInfo) -> Table:
    """The session's actions, last first: the order a rollback undoes them in, each undo in its connector's
    words. Only the undo's words wrap (a word too long for the column folds), so a narrow terminal cuts
    nothing."""
    connectors = installed_connectors()
    table = Table(title=f"Rollback of {session.id}, last step first", box=box.SIMPLE_HEAD)
    # the names and statuses keep their width; the undo's words wrap in what is left
    longest = max((len(a.api_name) for a in session.actions), default=0)
    table.add_column("seq", no_wrap=True)
    table.add_column("api name", min_width=longest, overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("undone by", overflow="fold")
    table.add_column("undo status", no_wrap=True)
    for action in sorted(session.actions, key=lambda a: a.seq, reverse=True):
        has_undo = action.undo is not None and not action.undo.is_none
        undone_by = words_of(connectors.find(action.connector), action).undo.how if has_undo else "—"
        table.add_row(str(action.seq), action.api_name, _status(action.status), escape(undone_by), action.undo_status)
    return table


def _status(status: str) -> str:
    colour = {"ROLLED_BACK": "yellow", "FAILED": "red", "SUCCESS": "green"}.get(status, "white")
    return f"[{colour}]{status}[/]"


class Wire:
    """Every request either fake receives, in the order they arrive: each fake appends its records to a
    :class:`Tap` given as its ``requests``, which also adds them here."""

    def __init__(self) -> None:
        self._calls: list[tuple[str, Any]] = []
        self._lock = threading.Lock()

    def tap(self, service: str) -> Tap[Any]:
        return Tap(self, service)

    def add(self, service: str, record: Any) -> None:
        with self._lock:
            self._calls.append((service, record))

    def since(self, position: int) -> list[tuple[str, Any]]:
        with self._lock:
            return self._calls[position:]

    def __len__(self) -> int:
        with self._lock:
            return len(self._calls)


class Tap(list[T]):
    """A fake's list of requests that also tells the :class:`Wire` of each one."""

    def __init__(self, wire: Wire, service: str) -> None:
        super().__init__()
        self.wire = wire
        self.service = service

    def append(self, record: T) -> None:
        super().append(record)
        self.wire.add(self.service, record)
