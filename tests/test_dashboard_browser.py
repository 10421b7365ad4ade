"""The dashboard in a real browser (Debian's Chromium, headless, driven by Playwright) against the real
server on 127.0.0.1: what a reviewer and an admin do, end to end, with htmx and the page's script running
under the Content-Security-Policy; and the API docs page, offline. Screenshots go to the test run's temporary
folder, under screenshots/."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from dashboard import CHROMIUM, CHROMIUM_FLAGS, HOSTILE, Account, account, chromium_available
from playwright.sync_api import Browser, Page, Route, expect, sync_playwright
from serving import RunningServer, Tenant, is_loopback

from agentrein import ActionStatus, ApprovalRejectedError
from agentrein_core.commands import NewPolicy
from agentrein_core.statuses import UserRole
from agentrein_testing import FakeService

pytestmark = pytest.mark.skipif(not chromium_available(), reason=f"no browser at {CHROMIUM} (.ci/run installs it)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def server(servers: Any) -> RunningServer:
    """The browser tests run against one server on SQLite (the HTTP-level tests cover both databases)."""
    running: RunningServer = servers.on("sqlite:///")
    return running


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.getbasetemp() / "screenshots"
    folder.mkdir(exist_ok=True)
    return folder


class Tab:
    """One browser tab (in a context of its own: its own cookies), noting what the console reports, where
    Content-Security-Policy violations and script errors appear."""

    def __init__(self, browser: Browser, server: RunningServer, **context: Any) -> None:
        self.context = browser.new_context(base_url=server.url, **context)
        self.page: Page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.console_errors: list[str] = []
        self.dialogs: list[str] = []
        #: Statuses a test asks for on purpose; Chromium reports each as "Failed to load resource".
        self.expected_statuses: set[int] = set()
        self.page.on("console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.console_errors.append(str(e)))
        self.page.on("dialog", self._dialog)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def sign_in(self, who: Account) -> Page:
        page = self.page
        page.goto("/")
        # 127.0.0.1 is a secure context: the browser keeps the Secure cookies, and no warning says otherwise
        expect(page.locator("#insecure-warning")).to_be_hidden()
        assert page.evaluate("window.isSecureContext")
        page.get_by_label("Email").fill(who.email)
        page.get_by_label("Password").fill(who.password)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
        return page


@pytest.fixture
def tabs(browser: Browser, server: RunningServer) -> Iterator[list[Tab]]:
    opened: list[Tab] = []
    yield opened
    for tab in opened:
        tab.context.close()
    for tab in opened:
        expected = tuple(f"the server responded with a status of {status} " for status in tab.expected_statuses)
        unexpected = [e for e in tab.console_errors if not (expected and any(x in e for x in expected))]
        assert without_aborted_polls(unexpected) == [], "the browser reported errors (a CSP violation, a script error)"


def without_aborted_polls(errors: list[str]) -> list[str]:
    """What the console reported, less the queue's polls that a decision aborted on purpose (its form's
    ``hx-sync="#queue:abort"``, so no stale list is swapped over the decided card): htmx reports each abort
    as ``htmx:afterRequest`` then ``htmx:sendAbort``, whenever a click lands while a poll is under way."""
    kept = list(errors)
    for abort in [e for e in errors if e.startswith("htmx:sendAbort")]:
        kept.remove(abort)
        kept.remove(next(e for e in kept if e.startswith("htmx:afterRequest")))
    return kept


def open_tab(tabs: list[Tab], browser: Browser, server: RunningServer, **context: Any) -> Tab:
    tab = Tab(browser, server, **context)
    tabs.append(tab)
    return tab


def blocked_agent_call(
    tenant: Tenant, service: FakeService, outcome: dict[str, Any], *, intent: str = "Refund order 7"
) -> threading.Thread:
    """An agent thread whose POST waits for a before-execution approval; ``outcome`` gets its result."""
    ar = tenant.client()
    session = ar.new_session(agent_id="billing-agent", intent=intent)
    api = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", requires_approval=["POST *"])
    outcome["session"] = session

    def call() -> None:
        try:
            outcome["response"] = api.post("/v1/things", json={"amount": 4200, "customer": "cus_7"})
        except Exception as err:  # the test looks at which
            outcome["error"] = err
        finally:
            outcome["ar"] = ar

    agent = threading.Thread(target=call, name="blocked-agent")
    agent.start()
    return agent


def test_a_reviewer_approves_in_the_browser_and_the_waiting_agent_call_completes(
    browser: Browser,
    server: RunningServer,
    tenant: Tenant,
    service: FakeService,
    tabs: list[Tab],
    screenshots: Path,
) -> None:
    reviewer = account(server, tenant, UserRole.REVIEWER)
    page = open_tab(tabs, browser, server).sign_in(reviewer)
    outcome: dict[str, Any] = {}
    agent = blocked_agent_call(tenant, service, outcome)  # after the queue is open: it must arrive live
    card = page.locator("article.approval").filter(has_text="POST /v1/things")
    expect(card).to_be_visible()
    expect(card).to_contain_text("Refund order 7")
    expect(card).to_contain_text("Before it runs")
    expect(card.locator(".countdown")).to_contain_text("left")
    page.screenshot(path=screenshots / "approvals-queue.png", full_page=True)
    assert agent.is_alive() and service.requests == []
    card.get_by_label("Reason (optional)").fill("checked the order")
    page.keyboard.press("Tab")  # the Approve button is next: reachable from the keyboard
    page.keyboard.press("Enter")
    expect(card).to_contain_text("You approved this request.")
    agent.join(timeout=30)
    assert not agent.is_alive()
    assert outcome["response"].status_code == 201
    # the card, among the decided now, says what became of the call, as the queue refreshes by itself
    decided = page.locator("article.approval").filter(has_text="POST /v1/things")
    expect(decided.locator(".outcome")).to_have_text("Approved: the agent's call ran.")
    page.screenshot(path=screenshots / "approvals-approved.png", full_page=True)
    ar = outcome["ar"]
    (action,) = ar.get_session(outcome["session"]).actions
    assert action.status is ActionStatus.SUCCESS
    assert [a.resolved_by for a in ar.get_session(outcome["session"]).approvals] == [reviewer.email]
    ar.close()


def test_a_rejection_with_a_reason_reaches_the_agent(
    browser: Browser, server: RunningServer, tenant: Tenant, service: FakeService, tabs: list[Tab]
) -> None:
    outcome: dict[str, Any] = {}
    agent = blocked_agent_call(tenant, service, outcome)
    page = open_tab(tabs, browser, server).sign_in(account(server, tenant, UserRole.REVIEWER))
    card = page.locator("article.approval").filter(has_text="POST /v1/things")
    card.get_by_label("Reason (optional)").fill("wrong customer")
    card.get_by_role("button", name="Reject").click()
    expect(card).to_contain_text("You rejected this request.")
    agent.join(timeout=30)
    error = outcome["error"]
    assert isinstance(error, ApprovalRejectedError)
    assert error.reason == "wrong customer"
    assert service.requests == []  # the call never ran
    outcome["ar"].close()


def test_a_rollback_started_from_the_session_page_undoes_last_first(
    browser: Browser,
    server: RunningServer,
    tenant: Tenant,
    service: FakeService,
    tabs: list[Tab],
    screenshots: Path,
) -> None:
    ar = tenant.client()
    session = ar.new_session(agent_id="provisioner", intent="Create three things")
    api = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    created = [api.post("/v1/things", json={"n": n}).json()["id"] for n in range(3)]
    ar.complete_session(session)
    page = open_tab(tabs, browser, server).sign_in(account(server, tenant, UserRole.ADMIN))
    page.goto(f"/dashboard/sessions/{session.id}")
    expect(page.locator(".timeline > li")).to_have_count(3)
    page.get_by_role("link", name="Roll back…").click()
    steps = page.locator("ol.chain > li")
    expect(steps).to_have_count(3)
    assert [steps.nth(i).text_content().split()[0] for i in range(3)] == ["#3", "#2", "#1"]  # type: ignore[union-attr]
    page.get_by_role("button", name="Confirm rollback").click()
    progress = page.locator("#rollback")
    expect(progress).to_contain_text("3 of 3 undos dealt with", timeout=30_000)
    expect(progress).to_contain_text("Rollback: succeeded")
    expect(progress.locator("li").filter(has_text="Undo: done")).to_have_count(3)
    page.screenshot(path=screenshots / "session-rolled-back.png", full_page=True)
    deletes = [r.path for r in service.requests if r.method == "DELETE"]
    assert deletes == [f"/v1/things/{thing}" for thing in reversed(created)]
    assert service.resources.get("things", {}) == {}
    ar.close()


def test_a_first_rollback_on_a_fresh_server_is_warned_fixed_on_the_connectors_page_then_succeeds(
    browser: Browser, server: RunningServer, service: FakeService, tabs: list[Tab], screenshots: Path
) -> None:
    fresh = server.tenant(http_undo=False)  # as on a new server: every connector starts disabled
    ar = fresh.client()
    session = ar.new_session(agent_id="provisioner", intent="Create two things")
    api = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    for n in range(2):
        api.post("/v1/things", json={"n": n})
    ar.complete_session(session)
    page = open_tab(tabs, browser, server).sign_in(account(server, fresh, UserRole.ADMIN))
    page.goto(f"/dashboard/sessions/{session.id}/rollback")
    warning = page.get_by_role("alert")
    expect(warning).to_contain_text("2 of these undos cannot run on this server.")
    expect(page.locator("li.cannot-run")).to_have_count(2)
    expect(page.locator("li.cannot-run").first).to_contain_text("connector 'http' is not enabled for this organisation")
    page.screenshot(path=screenshots / "rollback-confirm-connector-not-enabled.png", full_page=True)
    page.get_by_role("link", name="Fix http on the Connectors page").first.click()
    card = page.locator("#connector-http")
    card.get_by_label("Allowed hosts").fill("127.0.0.1")
    card.get_by_label("Headers").fill("Authorization: Bearer undo-key")
    page.screenshot(path=screenshots / "connectors-http-form.png", full_page=True)
    card.get_by_role("button", name="Enable http").click()
    expect(page.locator("#messages")).to_contain_text("http enabled.")
    expect(page.locator("#connector-http")).to_contain_text("credentials stored")
    expect(page.locator("#connector-http").get_by_label("Allowed hosts")).to_have_value("127.0.0.1")
    page.goto(f"/dashboard/sessions/{session.id}/rollback")
    expect(page.locator("li.cannot-run")).to_have_count(0)
    page.get_by_role("button", name="Confirm rollback").click()
    expect(page.locator("#rollback")).to_contain_text("Rollback: succeeded", timeout=30_000)
    assert service.resources.get("things", {}) == {}
    assert {r.authorization for r in service.requests if r.method == "DELETE"} == {"Bearer undo-key"}
    ar.close()


def test_a_refused_connector_form_says_why_beside_the_field_and_keeps_what_was_typed(
    browser: Browser, server: RunningServer, tenant: Tenant, tabs: list[Tab], screenshots: Path
) -> None:
    tab = open_tab(tabs, browser, server)
    tab.expected_statuses.add(400)
    page = tab.sign_in(account(server, tenant, UserRole.ADMIN))
    page.goto("/dashboard/connectors")
    card = page.locator("#connector-http")
    card.get_by_label("Allowed hosts").fill("api.example.com\n*.example.com")
    card.get_by_label("Allowed methods").fill("DELETE\nGET")
    card.get_by_label("Headers").fill("Authorization: Bearer s3cret")
    card.get_by_role("button", name="Save http").click()
    expect(page.locator("#messages")).to_contain_text("http not enabled: config.allowedMethods")
    card = page.locator("#connector-http")
    methods = card.get_by_label("Allowed methods")
    expect(methods).to_have_value("DELETE\nGET")
    expect(methods).to_have_attribute("aria-invalid", "true")
    expect(card.locator(".field-error")).to_contain_text("methods must be among POST, PUT, PATCH, DELETE")
    expect(card.get_by_label("Allowed hosts")).to_have_value("api.example.com\n*.example.com")
    expect(card.get_by_label("Headers")).to_have_value("")  # a secret is typed again, never sent back
    page.screenshot(path=screenshots / "connectors-refused-kept.png", full_page=True)
    assert "s3cret" not in page.content()


def test_after_a_rollback_every_status_is_labelled_in_words_and_what_stays_says_why(
    browser: Browser, server: RunningServer, tenant: Tenant, service: FakeService, tabs: list[Tab], screenshots: Path
) -> None:
    ar = tenant.client()
    session = ar.new_session(agent_id="provisioner", intent="Create two things, delete the first")
    api = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")
    first = api.post("/v1/things", json={"n": 1}).json()["id"]
    api.post("/v1/things", json={"n": 2})
    api.delete(f"/v1/things/{first}")
    ar.complete_session(session)
    page = open_tab(tabs, browser, server).sign_in(account(server, tenant, UserRole.ADMIN))
    page.goto(f"/dashboard/sessions/{session.id}")
    cards = page.locator(".timeline > li")
    expect(cards.nth(0).locator("header")).to_contain_text("Call: succeeded")
    expect(cards.nth(0).locator("header")).to_contain_text("Undo: not undone yet")
    expect(cards.nth(2).locator("header")).to_contain_text("Undo: none possible")
    expect(cards.nth(2).locator("header")).to_contain_text("a delete has no inverse")
    page.screenshot(path=screenshots / "session-before-rollback-in-words.png", full_page=True)
    page.get_by_role("link", name="Roll back…").click()
    host = service.base_url.removeprefix("http://")
    expect(page.locator("ol.chain > li").first).to_contain_text(
        re.compile(rf"#3 Delete thing {first} on {re.escape(host)}\s*→ stays deleted: a delete has no inverse")
    )
    page.get_by_role("button", name="Confirm rollback").click()
    progress = page.locator("#rollback")
    expect(progress.locator(".status").first).to_have_text("Rollback: succeeded", timeout=30_000)
    expect(progress.locator(".status").first).to_have_class(re.compile(r"\btone-good\b"))
    skipped = progress.locator("li").filter(has_text="Undo: skipped")
    expect(skipped).to_contain_text(f"#3 Delete thing {first} on {host}")
    expect(skipped).to_contain_text(f"DELETE /v1/things/{first} stays deleted: a delete has no inverse")
    status = page.locator(".facts dd").first
    expect(status).to_contain_text("Partially reverted")
    expect(status).to_contain_text("everything with an inverse was undone")
    expect(status.locator(".status")).not_to_have_class(re.compile(r"\btone-bad\b"))
    expect(page.locator("main .tone-bad")).to_have_count(0)  # nothing went wrong: nothing is red
    expect(page.locator("#messages")).to_have_text("")  # no "Rollback started." once it has finished
    labels = page.locator(".timeline .status").all_text_contents()
    assert labels and all(text.startswith(("Call: ", "Undo: ", "Not verified", "Checking")) for text in labels)
    page.screenshot(path=screenshots / "session-rolled-back-in-words.png", full_page=True)
    ar.close()


def test_a_policy_added_in_the_browser_holds_an_agents_call_until_approved(
    browser: Browser,
    server: RunningServer,
    tenant: Tenant,
    service: FakeService,
    tabs: list[Tab],
    screenshots: Path,
) -> None:
    page = open_tab(tabs, browser, server).sign_in(account(server, tenant, UserRole.ADMIN))
    page.goto("/dashboard/policies")
    page.get_by_label("Name", exact=True).fill("approve refunds")
    page.get_by_label("Effect").select_option("REQUIRE_APPROVAL")
    page.get_by_label("Hold the call until a reviewer approves it").check()
    page.get_by_label("Wait for a reviewer").fill("30")
    page.get_by_label("API name").fill("POST /v1/refunds")
    page.get_by_role("button", name="Add policy").click()
    row = page.locator("tbody tr").filter(has_text="approve refunds")
    expect(row).to_contain_text("holds the call until a reviewer approves it (the agent waits, for 30 minutes)")
    page.screenshot(path=screenshots / "policies-before-execution.png", full_page=True)
    ar = tenant.client()
    session = ar.new_session(agent_id="billing-agent", intent="Refund order 9")
    api = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http")  # declares no approvals
    outcome: dict[str, Any] = {}
    agent = threading.Thread(target=lambda: outcome.update(response=api.post("/v1/refunds", json={"amount": 1})))
    agent.start()
    page.goto("/dashboard/approvals")
    card = page.locator("article.approval").filter(has_text="POST /v1/refunds")
    expect(card).to_contain_text("Before it runs")
    assert agent.is_alive() and service.requests == []
    card.get_by_role("button", name="Approve").click()
    expect(card).to_contain_text("You approved this request.")
    agent.join(timeout=30)
    assert outcome["response"].status_code == 201
    ar.close()


def test_an_agent_payload_with_markup_stays_inert_in_the_browser(
    browser: Browser, server: RunningServer, tenant: Tenant, service: FakeService, tabs: list[Tab]
) -> None:
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}) as api:
        session_id = api.post("/sessions", json={"agentId": "agent", "intent": HOSTILE}).json()["id"]
        body = {"connector": "http", "apiName": "POST /v1/x", "operationType": "CREATE", "payload": {"note": HOSTILE}}
        api.post(f"/sessions/{session_id}/actions", json={**body, "requiresApproval": True})
    tab = open_tab(tabs, browser, server)
    page = tab.sign_in(account(server, tenant, UserRole.REVIEWER))
    expect(page.get_by_text("<script>window.pwned=1</script>").first).to_be_visible()
    page.goto(f"/dashboard/sessions/{session_id}")
    page.get_by_text("Payload, response and undo").click()
    expect(page.locator("pre").first).to_contain_text("<script>window.pwned=1</script><img src=x onerror=")
    assert page.evaluate("window.pwned") is None
    assert page.locator("img").count() == 0
    assert tab.dialogs == []


def test_a_reviewer_is_refused_the_admin_pages(
    browser: Browser, server: RunningServer, tenant: Tenant, tabs: list[Tab]
) -> None:
    tab = open_tab(tabs, browser, server)
    tab.expected_statuses.add(403)
    page = tab.sign_in(account(server, tenant, UserRole.REVIEWER))
    expect(page.get_by_role("link", name="Policies")).to_have_count(0)
    for path in ("/dashboard/policies", "/dashboard/connectors", "/dashboard/keys", "/dashboard/users"):
        response = page.goto(path)
        assert response is not None and response.status == 403
        expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()


#: What a page at phone width must not do: scroll sideways (the page, or any part of it), or wrap a pill's
#: words onto a second line (a pill is one line high when its height is under two of its lines).
LAYOUT_FAULTS = """() => ({
  pageWidth: document.documentElement.scrollWidth - window.innerWidth,
  scrolling: [...document.querySelectorAll("body *")]
    .filter(e => e.scrollWidth > e.clientWidth + 1 && ["auto", "scroll"].includes(getComputedStyle(e).overflowX))
    .map(e => e.tagName.toLowerCase() + "." + e.className),
  wrappedPills: [...document.querySelectorAll(".status")]
    .filter(p => p.getBoundingClientRect().height >= 2 * parseFloat(getComputedStyle(p).lineHeight))
    .map(p => p.textContent),
  pills: document.querySelectorAll(".status").length,
})"""
PHONE = {"width": 390, "height": 844}


def check_fits(page: Page, shot: Path) -> dict[str, Any]:
    """The page's layout faults at phone width (none expected), after a screenshot of it."""
    page.screenshot(path=shot, full_page=True)
    faults: dict[str, Any] = page.evaluate(LAYOUT_FAULTS)
    assert (faults["pageWidth"], faults["scrolling"], faults["wrappedPills"]) == (0, [], []), shot.name
    return faults


def test_every_page_fits_a_phone_screen_without_sideways_scrolling_or_broken_pills(
    browser: Browser, server: RunningServer, tenant: Tenant, service: FakeService, tabs: list[Tab], screenshots: Path
) -> None:
    ar = tenant.client()
    ran = ar.new_session(agent_id="provisioner-of-the-quarterly-billing-run", intent="A rather long intent " * 6)
    api = ar.wrap(httpx.Client(base_url=service.base_url), ran, connector="http")
    thing = api.post("/v1/things", json={"n": 1}).json()["id"]
    api.delete(f"/v1/things/{thing}")
    ar.complete_session(ran)
    server.engine.policies.add_policy(
        tenant.org_id,
        NewPolicy(
            "hold every refund of the billing agents",
            "REQUIRE_APPROVAL",
            api_name="POST /v1/refunds*",
            agent_id="billing-*",
            before_execution=True,
        ),
    )
    server.services.configuration.update_settings(tenant.org_id, webhook_hosts=["127.0.0.1"])
    hook, _ = server.services.configuration.add_webhook(
        tenant.org_id, "http://127.0.0.1:9/a/rather/long/path/to/the/receiver", ["approval.requested"], None, "json"
    )
    outcome: dict[str, Any] = {}
    agent = blocked_agent_call(tenant, service, outcome, intent="A rather long intent " * 6)
    tab = open_tab(tabs, browser, server, viewport=PHONE)
    tab.expected_statuses.add(404)
    page = tab.sign_in(account(server, tenant, UserRole.ADMIN))
    expect(page.locator("article.approval")).to_have_count(1)
    pages = {
        "approvals": "/dashboard/approvals",
        "sessions": "/dashboard/sessions",
        "session": f"/dashboard/sessions/{ran.id}",
        "rollback-confirm": f"/dashboard/sessions/{ran.id}/rollback",
        "policies": "/dashboard/policies",
        "connectors": "/dashboard/connectors",
        "keys": "/dashboard/keys",
        "users": "/dashboard/users",
        "webhooks": "/dashboard/webhooks",
        "webhook-deliveries": f"/dashboard/webhooks/{hook.webhook_id}",
        "settings": "/dashboard/settings",
        "not-found": "/dashboard/sessions/ses_nope",
    }
    pills = 0
    for name, path in pages.items():
        page.goto(path)
        pills += check_fits(page, screenshots / f"phone-{name}.png")["pills"]
    assert pills > 10  # the pages had pills to check (sessions, actions, undos, connectors, keys…)
    signed_out = open_tab(tabs, browser, server, viewport=PHONE).page
    signed_out.goto("/dashboard/login")
    check_fits(signed_out, screenshots / "phone-sign-in.png")
    page.goto("/dashboard/approvals")
    page.locator("article.approval").get_by_role("button", name="Reject").click()
    agent.join(timeout=30)
    outcome["ar"].close()
    ar.close()


def test_a_signed_out_live_queue_sends_the_page_to_sign_in(
    browser: Browser, server: RunningServer, tenant: Tenant, tabs: list[Tab]
) -> None:
    reviewer = account(server, tenant, UserRole.REVIEWER)
    tab = open_tab(tabs, browser, server)
    tab.expected_statuses.add(401)  # the poll that finds no one signed in
    page = tab.sign_in(reviewer)
    (user,) = [u for u in server.engine.accounts.list_users(tenant.org_id) if u.email == reviewer.email]
    server.engine.accounts.delete_user(tenant.org_id, user.user_id)
    expect(page).to_have_url(re.compile(r"/dashboard/login"), timeout=10_000)


def test_the_api_docs_show_every_operation_with_nothing_loaded_from_off_the_machine(
    browser: Browser, server: RunningServer, tabs: list[Tab], screenshots: Path
) -> None:
    tab = open_tab(tabs, browser, server)
    elsewhere: list[str] = []

    def loopback_only(route: Route) -> None:
        host = urlsplit(route.request.url).hostname
        if host is None or is_loopback(host):  # data: and blob: URLs name no host
            route.continue_()
        else:
            elsewhere.append(route.request.url)  # refused before it is sent, as if the machine were offline
            route.abort()

    tab.context.route("**/*", loopback_only)
    document = httpx.get(f"{server.url}/schema/openapi.json").json()
    operations = [op for item in document["paths"].values() for op in item.values()]
    page = tab.page
    page.set_default_timeout(60_000)  # Swagger UI's 1.7 MB of script, parsed on a machine that may be busy
    page.goto("/schema")
    expect(page.locator(".opblock")).to_have_count(len(operations), timeout=60_000)
    expect(page.get_by_text("Complete a session")).to_be_visible()
    page.screenshot(path=screenshots / "api-docs.png", full_page=True)
    complete = page.locator(".opblock").filter(has_text="/sessions/{session_id}/complete")
    complete.locator(".opblock-summary").click()
    for status in ("401", "404", "409"):
        expect(complete.locator(f"tr.response[data-code='{status}'] select").first).to_have_value(
            "application/problem+json"
        )
    expect(complete.get_by_text("invalid-transition")).to_be_visible()
    complete.screenshot(path=screenshots / "api-docs-complete-session.png")
    assert elsewhere == []


# what a card says (issue 13, items 2-5) -----------------------------------------------------------------
def held_over_rest(tenant: Tenant, connector: str, api_name: str, payload: dict[str, Any], **more: Any) -> str:
    """A call held for approval, recorded over REST as an agent's SDK records it; its approval's id."""
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}) as api:
        session = {"agentId": more.pop("agent_id", "billing-agent"), "intent": more.pop("intent", "Tidy up")}
        session_id = api.post("/sessions", json=session).json()["id"]
        action = {"connector": connector, "apiName": api_name, "payload": payload, "requiresApproval": True, **more}
        logged = api.post(f"/sessions/{session_id}/actions", json=action)
        assert logged.status_code == 201, logged.text
        return str(logged.json()["approval"]["approvalId"])


def agent_thread(call: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """``call()`` in an agent's thread (it waits there for its approval); what it returned or raised."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except Exception as err:  # the test looks at which
            outcome["error"] = err

    thread = threading.Thread(target=run, name="waiting-agent")
    thread.start()
    return thread, outcome


def things_then_a_held_delete(
    tenant: Tenant, service: FakeService
) -> tuple[Any, list[str], threading.Thread, dict[str, Any]]:
    """An agent that created two things and now waits to delete the first: its AgentRein, the things' ids,
    and its thread (waiting) with what its delete returned or raised."""
    ar = tenant.client()
    session = ar.new_session(agent_id="cleanup-agent", intent="Replace the first thing")
    api = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", requires_approval=["DELETE *"])
    made = [api.post("/v1/things", json={"n": n}).json()["id"] for n in range(2)]
    thread, outcome = agent_thread(lambda: api.delete(f"/v1/things/{made[0]}"))
    return ar, made, thread, outcome


def test_a_card_says_what_approving_and_rejecting_will_do(
    browser: Browser, server: RunningServer, tenant: Tenant, service: FakeService, tabs: list[Tab], screenshots: Path
) -> None:
    ar, made, agent, outcome = things_then_a_held_delete(tenant, service)
    refund = {"params": {"charge": "ch_1", "amount": 4200, "currency": "usd"}}
    held_over_rest(tenant, "stripe", "refunds.create", refund, operationType="CREATE", intent="Refund order 7")
    page = open_tab(tabs, browser, server).sign_in(account(server, tenant, UserRole.REVIEWER))
    host = service.base_url.removeprefix("http://")
    card = page.locator("article.approval").filter(has_text=f"Delete thing {made[0]}")
    reject = card.get_by_role("region", name="If you reject")
    expect(reject).to_contain_text("the session is rolled back: 2 actions are undone, last done first")
    steps = reject.locator("ol.steps > li")
    expect(steps).to_have_text(
        [
            f"#2 Create thing {made[1]} on {host}: undone by Delete /v1/things/{made[1]} on {host}",
            f"#1 Create thing {made[0]} on {host}: undone by Delete /v1/things/{made[0]} on {host}",
        ]
    )
    expect(card.get_by_role("region", name="If you approve")).to_contain_text("known only once it has run")
    money = page.locator("article.approval").filter(has_text="Create Stripe refund of 42.00 USD for charge ch_1")
    approve = money.get_by_role("region", name="If you approve")
    expect(approve.locator(".irreversible")).to_have_text("Cannot be undone")
    expect(approve).to_contain_text("money that left cannot be called back by an API call")
    page.screenshot(path=screenshots / "approvals-consequences.png", full_page=True)
    card.get_by_role("button", name="Reject").click()
    expect(card).to_contain_text("You rejected this request.")
    agent.join(timeout=30)
    assert isinstance(outcome["error"], ApprovalRejectedError)
    ar.close()


def test_a_card_is_titled_in_plain_words_with_the_payload_one_click_away(
    browser: Browser, server: RunningServer, tenant: Tenant, service: FakeService, tabs: list[Tab], screenshots: Path
) -> None:
    ar, made, agent, outcome = things_then_a_held_delete(tenant, service)
    closing = {
        "state": "closed",
        "state_reason": "not_planned",
        "target": "https://api.github.com/repos/acme/web/issues/12",
    }
    held_over_rest(tenant, "github", "issues.update", closing, operationType="UPDATE")
    held_over_rest(
        tenant, "stripe", "customers.create", {"params": {"email": "ada@example.com"}}, operationType="CREATE"
    )
    page = open_tab(tabs, browser, server).sign_in(account(server, tenant, UserRole.REVIEWER))
    host = service.base_url.removeprefix("http://")
    card = page.locator("article.approval").filter(has_text=f"Delete thing {made[0]} on {host}")
    expect(card.locator("h3")).to_have_text(f"Delete thing {made[0]} on {host}")
    expect(card.locator(".facts")).to_contain_text(f"DELETE /v1/things/{made[0]} through http to {host}")
    github_card = page.locator("article.approval").filter(has_text="Close issue acme/web#12 as not planned")
    expect(github_card.locator(".facts")).to_contain_text("through github to api.github.com")
    expect(
        page.locator("article.approval h3").filter(has_text="Create Stripe customer ada@example.com")
    ).to_be_visible()
    payload = card.locator("details.payload pre")
    expect(payload).to_be_hidden()  # one click away
    card.get_by_text("Payload as recorded (redacted)").click()
    expect(payload).to_contain_text(f'"url": "{service.base_url}/v1/things/{made[0]}"')  # whole, never cut
    page.screenshot(path=screenshots / "approvals-in-words.png", full_page=True)
    card.get_by_role("button", name="Approve").click()
    agent.join(timeout=30)
    assert outcome["result"].status_code == 200
    ar.close()


def test_requests_someone_waits_for_come_first_by_time_left_and_look_different(
    browser: Browser, server: RunningServer, tenant: Tenant, service: FakeService, tabs: list[Tab], screenshots: Path
) -> None:
    ar = tenant.client()
    ar.add_policy(name="review refunds", effect="REQUIRE_APPROVAL", api_name="POST /v1/refunds")
    session = ar.new_session(agent_id="billing-agent", intent="Refund order 7")
    ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http").post("/v1/refunds", json={"amount": 5})
    for minutes in (30, 4):  # the one with less time left asked last
        order = {"method": "DELETE", "url": f"https://api.example.com/v1/orders/ord_{minutes}"}
        api_name, timeout = f"DELETE /v1/orders/ord_{minutes}", minutes * 60_000
        held = held_over_rest(tenant, "http", api_name, order, operationType="DELETE", approvalTimeoutMs=timeout)
        with server.engine.store.transaction() as tx:  # as its agent's long-poll, open while it waits
            tx.approvals.note_waiter(held, datetime.now(UTC) + timedelta(minutes=minutes))
    guarded = ar.new_session(agent_id="provisioner", intent="Make two things")
    undo = {"POST /v1/things": {"requireApproval": True}}
    things = ar.wrap(httpx.Client(base_url=service.base_url), guarded, connector="http", undo=undo)
    made = [things.post("/v1/things", json={}).json()["id"] for _ in range(2)]
    ar.get_session(guarded)  # the agent's read sends its last confirmation: the rollback starts from that call
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}) as rest:
        started = rest.post(f"/sessions/{guarded.id}/rollback", json={"approvalTimeoutMs": 10 * 60_000})
        assert started.status_code in (200, 202), started.text
    page = open_tab(tabs, browser, server).sign_in(account(server, tenant, UserRole.REVIEWER))
    cards = page.locator("article.approval")
    host = service.base_url.removeprefix("http://")
    expect(cards.locator("h3")).to_have_text(
        [
            "Delete order ord_4 on api.example.com",  # 4 minutes left
            f"Create thing {made[1]} on {host}",  # its undo, with 10 minutes left
            "Delete order ord_30 on api.example.com",  # 30 minutes left
            re.compile(r"^Create refund \S+ on 127\.0\.0\.1:\d+$"),  # a review, the oldest
        ]
    )
    expect(page.locator("article.approval.blocking")).to_have_count(3)
    expect(cards.nth(0).locator(".waiting")).to_have_text("The agent is waiting: nothing goes on until you decide")
    expect(cards.nth(1).locator(".waiting")).to_have_text("The rollback is waiting: nothing goes on until you decide")
    expect(cards.nth(1).get_by_role("region", name="If you approve")).to_contain_text(
        f"The undo runs (Delete /v1/things/{made[1]} on {host}) and the rollback goes on; then 1 action is still "
        "to undo, last done first."
    )
    expect(cards.nth(1).get_by_role("region", name="If you reject")).to_contain_text(
        f"The rollback stops here: the session is marked FAILED and this action stays done (Create thing {made[1]}"
    )
    expect(cards.nth(3).locator(".reviewing")).to_have_text("A review: the call has already run")
    border = cards.nth(0).evaluate("el => getComputedStyle(el).borderLeftWidth")
    assert border == "6px" and cards.nth(3).evaluate("el => getComputedStyle(el).borderLeftWidth") == "1px"
    page.screenshot(path=screenshots / "approvals-blocking-first.png", full_page=True)
    ar.close()


def test_after_a_rejection_the_cards_say_the_session_was_rolled_back_and_the_review_was_undone(
    browser: Browser, server: RunningServer, tenant: Tenant, service: FakeService, tabs: list[Tab], screenshots: Path
) -> None:
    ar = tenant.client()
    ar.add_policy(name="review things", effect="REQUIRE_APPROVAL", api_name="POST /v1/things")
    session = ar.new_session(agent_id="cleanup-agent", intent="Make a thing, then tidy up")
    api = ar.wrap(httpx.Client(base_url=service.base_url), session, connector="http", requires_approval=["DELETE *"])
    thing = api.post("/v1/things", json={}).json()["id"]
    page = open_tab(tabs, browser, server).sign_in(account(server, tenant, UserRole.REVIEWER))
    review = page.locator("article.approval").filter(has_text=f"Create thing {thing}")
    review.get_by_role("button", name="Approve").click()
    expect(review).to_contain_text("You approved this request.")
    expect(review.locator(".outcome")).to_have_text("Approved: the action stays done.")
    agent, outcome = agent_thread(lambda: api.delete(f"/v1/things/{thing}"))
    held = page.locator("article.approval").filter(has_text=f"Delete thing {thing}")
    held_reject = held.get_by_role("region", name="If you reject")
    expect(held_reject).to_contain_text("1 action is undone")  # the thing a reviewer has just approved
    held.get_by_role("button", name="Reject").click()
    expect(held).to_contain_text("You rejected this request.")
    agent.join(timeout=30)
    assert isinstance(outcome["error"], ApprovalRejectedError)
    # the queue refreshes by itself: both cards of the session now say what became of their action
    refused = page.locator("article.approval").filter(has_text=f"Delete thing {thing}").locator(".outcome")
    expect(refused).to_have_text("Rejected: the agent's call did not run; the session was rolled back (1 undone).")
    undone = page.locator("article.approval").filter(has_text=f"Create thing {thing}").locator(".outcome")
    expect(undone).to_contain_text("Approved, then undone by the rollback of ")
    expect(undone).to_contain_text("before-execution approval rejected")
    page.screenshot(path=screenshots / "approvals-after-reject.png", full_page=True)
    ar.close()


def test_the_cards_fit_a_phone_screen_with_their_words_whole(
    browser: Browser, server: RunningServer, tenant: Tenant, service: FakeService, tabs: list[Tab], screenshots: Path
) -> None:
    ar, made, agent, outcome = things_then_a_held_delete(tenant, service)
    refund = {"params": {"charge": "ch_3MtwBwLkdIwHu7ix28a3tqPa", "amount": 4200, "currency": "usd"}}
    held_over_rest(
        tenant, "stripe", "refunds.create", refund, operationType="CREATE", intent="A rather long intent " * 6
    )
    tab = open_tab(tabs, browser, server, viewport={"width": 390, "height": 844})
    page = tab.sign_in(account(server, tenant, UserRole.REVIEWER))
    expect(page.locator("article.approval")).to_have_count(2)
    expect(page.locator("ol.steps > li")).to_have_count(2)
    page.screenshot(path=screenshots / "approvals-cards-phone.png", full_page=True)
    for n, card in enumerate(page.locator("article.approval").all(), start=1):  # each at its full size too
        card.screenshot(path=screenshots / f"approvals-cards-phone-{n}.png")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # pills, ids and step numbers each on one line: never broken inside a word
    broken = page.evaluate(
        """() => [...document.querySelectorAll(
                '.approval .status, .approval .id, .approval .seq, .approval .irreversible')]
            .filter(el => { const r = document.createRange(); r.selectNodeContents(el);
                            return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size > 1; })
            .map(el => el.textContent)"""
    )
    assert broken == []
    page.locator("article.approval").filter(has_text=f"Delete thing {made[0]}").get_by_role(
        "button", name="Reject"
    ).click()
    agent.join(timeout=30)
    assert isinstance(outcome["error"], ApprovalRejectedError)
    ar.close()
