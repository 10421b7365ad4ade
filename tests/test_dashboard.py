"""The dashboard over plain HTTP, as a browser without JavaScript sees it: signing in, who may see and do
what, CSRF, escaping, and each page's forms. (What needs JavaScript is in test_dashboard_browser.py.)"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from dashboard import HOSTILE, PASSWORD, Account, Visitor, account, visitor
from serving import RunningServer, Tenant

from agentrein_core.statuses import ApprovalStatus, UserRole
from agentrein_core.targets import ALLOW_PRIVATE_ENV
from agentrein_core.vault import Vault
from agentrein_server.dashboard import approvals as dashboard_approvals
from agentrein_server.dashboard import viewer


@pytest.fixture
def tenant(server: RunningServer) -> Tenant:
    return server.tenant()


@pytest.fixture
def api(tenant: Tenant) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {tenant.key}"}) as client:
        yield client


@pytest.fixture
def admin(server: RunningServer, tenant: Tenant) -> Account:
    return account(server, tenant, UserRole.ADMIN)


@pytest.fixture
def reviewer(server: RunningServer, tenant: Tenant) -> Account:
    return account(server, tenant, UserRole.REVIEWER)


@pytest.fixture
def as_admin(server: RunningServer, admin: Account) -> Iterator[Visitor]:
    with visitor(server, admin) as v:
        yield v


@pytest.fixture
def as_reviewer(server: RunningServer, reviewer: Account) -> Iterator[Visitor]:
    with visitor(server, reviewer) as v:
        yield v


def held_action(api: httpx.Client, **action: Any) -> dict[str, Any]:
    """A session whose one action waits for a before-execution approval; the write-ahead answer."""
    session_id = api.post("/sessions", json={"agentId": "billing-agent", "intent": "refund one order"}).json()["id"]
    body = {"connector": "http", "apiName": "POST /v1/refunds", "operationType": "CREATE", "payload": {}, **action}
    logged: dict[str, Any] = api.post(f"/sessions/{session_id}/actions", json={**body, "requiresApproval": True}).json()
    return logged


def approval_of(logged: dict[str, Any]) -> str:
    return str(logged["approval"]["approvalId"])


def session_that_ran(api: httpx.Client, *calls: tuple[str, str, str, dict[str, Any]]) -> str:
    """A session whose calls (connector, api name, operation type, undo config) ran; its id."""
    session_id = api.post("/sessions", json={"agentId": "provisioner"}).json()["id"]
    for connector, api_name, kind, undo in calls:
        body = {"connector": connector, "apiName": api_name, "operationType": kind, "payload": {}}
        action_id = api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]["actionId"]
        outcome = {"status": "SUCCESS", "response": {}, "undo": undo}
        assert api.patch(f"/sessions/{session_id}/actions/{action_id}", json=outcome).status_code == 200
    return session_id


#: A created thing's undo on a loopback port nothing listens on (the tests of the confirmation never run it).
DELETE_THING = {"type": "http-delete", "url": "http://127.0.0.1:9/v1/things/thi_1"}


# signing in --------------------------------------------------------------------------------------------------


def test_the_root_url_asks_to_sign_in_then_opens_the_page_first_asked_for(
    server: RunningServer, admin: Account
) -> None:
    with visitor(server) as v:
        assert v.get("/").headers["location"] == "/dashboard/approvals"
        to_sign_in = v.get("/dashboard/sessions?agent=x")
        assert to_sign_in.status_code == 303
        assert to_sign_in.headers["location"] == "/dashboard/login?next=%2Fdashboard%2Fsessions%3Fagent%3Dx"
        v.get(to_sign_in.headers["location"])
        signed_in = v.post(
            "/dashboard/login",
            {"email": admin.email.upper(), "password": PASSWORD, "next": "/dashboard/sessions?agent=x"},
        )
        assert signed_in.status_code == 303
        assert signed_in.headers["location"] == "/dashboard/sessions?agent=x"
        assert admin.email in v.get("/dashboard/sessions").text


def test_a_wrong_password_is_refused_without_saying_whether_the_email_exists(
    server: RunningServer, admin: Account
) -> None:
    with visitor(server) as v:
        v.get("/dashboard/login")
        wrong_password = v.post("/dashboard/login", {"email": admin.email, "password": "not the password"})
        unknown_email = v.post("/dashboard/login", {"email": "nobody@example.com", "password": PASSWORD})
        assert wrong_password.status_code == unknown_email.status_code == 401
        assert "The email or the password is wrong." in wrong_password.text
        assert "The email or the password is wrong." in unknown_email.text
        assert "__Host-agentrein-session" not in v.cookies
        assert v.get("/dashboard/approvals").status_code == 303


def test_repeated_failed_sign_ins_for_one_email_are_refused_for_a_while(server: RunningServer, admin: Account) -> None:
    with visitor(server) as v:
        v.get("/dashboard/login")
        for _ in range(5):
            assert v.post("/dashboard/login", {"email": admin.email, "password": "guess"}).status_code == 401
        throttled = v.post("/dashboard/login", {"email": admin.email, "password": PASSWORD})
        assert throttled.status_code == 429
        assert "Too many failed attempts" in throttled.text


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/\\evil.example", "/schema"])
def test_after_signing_in_the_dashboard_never_sends_you_to_another_site(
    server: RunningServer, admin: Account, target: str
) -> None:
    with visitor(server) as v:
        v.get("/dashboard/login")
        signed_in = v.post("/dashboard/login", {"email": admin.email, "password": PASSWORD, "next": target})
        assert signed_in.headers["location"] == "/dashboard/approvals"


def test_sign_in_cookies_are_secure_http_only_and_same_site(server: RunningServer, admin: Account) -> None:
    with visitor(server) as v:
        v.get("/dashboard/login")
        signed_in = v.post("/dashboard/login", {"email": admin.email, "password": PASSWORD})
        cookies = signed_in.headers.get_list("set-cookie")
        (session_cookie,) = [c for c in cookies if c.startswith("__Host-agentrein-session=")]
        attributes = {part.strip().lower() for part in session_cookie.split(";")[1:]}
        assert {"secure", "httponly", "samesite=lax", "path=/"} <= attributes
        assert not any(a.startswith("domain") for a in attributes)
        assert admin.email not in session_cookie  # encrypted, not merely signed


def test_signing_out_ends_every_sign_in_of_that_user(server: RunningServer, admin: Account, as_admin: Visitor) -> None:
    with visitor(server, admin) as elsewhere:
        copied = dict(as_admin.cookies)  # a cookie someone kept from before the sign-out
        assert as_admin.post("/dashboard/logout").status_code == 303
        assert as_admin.get("/dashboard/approvals").status_code == 303
        assert elsewhere.get("/dashboard/approvals").status_code == 303
        as_admin.cookies = copied
        assert as_admin.get("/dashboard/users").status_code == 303


def test_a_sign_in_ends_after_its_time_even_while_the_page_polls(
    as_reviewer: Visitor, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert as_reviewer.get("/dashboard/approvals/queue").status_code == 200
    monkeypatch.setattr(viewer, "SIGNED_IN_SECONDS", 0)
    assert as_reviewer.get("/dashboard/approvals").status_code == 303


def test_parallel_guesses_get_no_more_tries_than_sequential_ones(server: RunningServer, admin: Account) -> None:
    with visitor(server) as v:
        v.get("/dashboard/login")

        def guess(_: int) -> int:
            return v.post("/dashboard/login", {"email": admin.email, "password": "guess"}).status_code

        with ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(guess, range(24)))
        assert statuses.count(401) == 5
        assert set(statuses) <= {401, 429, 503}


def test_a_removed_user_is_signed_out_at_once(server: RunningServer, tenant: Tenant, as_reviewer: Visitor) -> None:
    (user,) = [u for u in server.engine.accounts.list_users(tenant.org_id) if u.role is UserRole.REVIEWER]
    server.engine.accounts.delete_user(tenant.org_id, user.user_id)
    assert as_reviewer.get("/dashboard/approvals").status_code == 303


# security ----------------------------------------------------------------------------------------------------


def test_a_form_without_the_right_csrf_token_is_refused_and_changes_nothing(
    server: RunningServer, tenant: Tenant, as_admin: Visitor
) -> None:
    as_admin.get("/dashboard/policies")
    as_admin.csrf = "forged"
    refused = as_admin.post("/dashboard/policies", {"name": "sneaky", "effect": "ALLOW"})
    assert refused.status_code == 403
    assert "expired or came from another site" in refused.text
    assert server.engine.policies.list_policies(tenant.org_id) == []


def test_every_page_carries_a_strict_content_security_policy(as_admin: Visitor) -> None:
    pages = ("/dashboard/login", "/dashboard/approvals", "/dashboard/sessions", "/dashboard/policies")
    errors = ("/dashboard/sessions/ses_nope", "/dashboard/nowhere", "/dashboard/sessions?since=0001-01-01T00:00+14:00")
    for path in (*pages, *errors):
        headers = as_admin.get(path).headers
        policy = headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
        assert headers["x-content-type-options"] == "nosniff"


def test_a_reviewer_is_refused_every_admin_page_and_action(
    server: RunningServer, tenant: Tenant, api: httpx.Client, as_reviewer: Visitor
) -> None:
    admin_pages = ("policies", "connectors", "keys", "users", "settings", "webhooks")
    for path in (f"/dashboard/{name}" for name in admin_pages):
        refused = as_reviewer.get(path)
        assert refused.status_code == 403, path
        assert "this is for admins" in refused.text
    page = as_reviewer.get("/dashboard/approvals").text
    assert 'href="/dashboard/policies"' not in page and 'href="/dashboard/users"' not in page
    assert as_reviewer.post("/dashboard/policies", {"name": "p", "effect": "BLOCK"}).status_code == 403
    assert as_reviewer.post("/dashboard/keys", {"role": "operator"}).status_code == 403
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    assert as_reviewer.post(f"/dashboard/sessions/{session_id}/rollback").status_code == 403
    assert server.engine.policies.list_policies(tenant.org_id) == []
    assert len(server.engine.accounts.list_api_keys(tenant.org_id)) == 1


def test_one_organisation_never_sees_or_decides_anothers_records(
    server: RunningServer, api: httpx.Client, tenant: Tenant
) -> None:
    logged = held_action(api)
    other = account(server, server.tenant(), UserRole.ADMIN)
    with visitor(server, other) as v:
        assert v.get(f"/dashboard/sessions/{logged['action']['sessionId']}").status_code == 404
        assert approval_of(logged) not in v.get("/dashboard/approvals").text
        assert logged["action"]["sessionId"] not in v.get("/dashboard/sessions").text
        assert v.post(f"/dashboard/approvals/{approval_of(logged)}/approve").status_code == 404
    assert server.engine.reviews.get_approval(tenant.org_id, approval_of(logged)).status is ApprovalStatus.PENDING


def test_what_an_agent_wrote_is_shown_as_text_never_as_markup(api: httpx.Client, as_reviewer: Visitor) -> None:
    session_id = api.post("/sessions", json={"agentId": "agent", "intent": HOSTILE}).json()["id"]
    body = {
        "connector": "http",
        "apiName": "POST /v1/<b>bold</b>",
        "operationType": "CREATE",
        "payload": {"note": HOSTILE, "link": "javascript:alert(1)"},
        "requiresApproval": True,
    }
    api.post(f"/sessions/{session_id}/actions", json=body)
    for page in (
        as_reviewer.get("/dashboard/approvals").text,
        as_reviewer.get(f"/dashboard/sessions/{session_id}").text,
    ):
        assert "<script>window.pwned" not in page and "<img src=x" not in page and "<b>bold</b>" not in page
        assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page
        assert 'href="javascript:' not in page


def test_a_missing_session_is_a_404_page_not_an_error(as_reviewer: Visitor) -> None:
    for path in ("/dashboard/sessions/ses_nope", "/dashboard/sessions/%00", "/dashboard/nowhere"):
        missing = as_reviewer.get(path)
        assert missing.status_code == 404, path
        assert "Not found" in missing.text


# approvals ---------------------------------------------------------------------------------------------------


def test_the_queue_shows_what_a_reviewer_needs_to_decide(api: httpx.Client, as_reviewer: Visitor) -> None:
    logged = held_action(api, payload={"amount": 4200, "order": "ord_7"})
    page = as_reviewer.get("/dashboard/approvals").text
    card = page[page.index(f'id="approval-{approval_of(logged)}"') :]
    for shown in ("billing-agent", "refund one order", "POST /v1/refunds", "Before it runs", "ord_7", "left"):
        assert shown in card, shown
    assert re.search(r'data-remaining="\d+"', card)


def test_a_long_queue_shows_the_requests_to_decide_first_and_counts_them_all(
    api: httpx.Client, as_reviewer: Visitor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dashboard_approvals, "SHOWN_PENDING", 2)
    held = [approval_of(held_action(api)) for _ in range(3)]
    page = as_reviewer.get("/dashboard/approvals").text
    assert [approval in page for approval in held] == [True, True, False]  # least time left first
    assert "Waiting for a decision (3)" in page and "The 2 to decide first are shown" in page
    more = re.search(r'<a href="(/dashboard/approvals\?shown=3)">Show 1 more</a>', page)
    assert more is not None
    page = as_reviewer.get(more.group(1)).text
    assert all(approval in page for approval in held) and "Show 1 more" not in page
    live = as_reviewer.get("/dashboard/approvals/queue", params={"shown": 3}).text  # the poll keeps all three
    assert all(approval in live for approval in held)
    for wrong in ("0", "1001", "many"):
        refused = as_reviewer.get("/dashboard/approvals", params={"shown": wrong})
        assert refused.status_code == 400 and "shown" in refused.text, wrong


def test_a_decision_is_recorded_with_the_signed_in_reviewer_and_reason(
    server: RunningServer, api: httpx.Client, tenant: Tenant, reviewer: Account, as_reviewer: Visitor
) -> None:
    logged = held_action(api)
    as_reviewer.get("/dashboard/approvals")
    answer = as_reviewer.post(f"/dashboard/approvals/{approval_of(logged)}/reject", {"reason": "wrong customer"})
    assert answer.status_code == 303
    assert "You rejected this request." in as_reviewer.get("/dashboard/approvals").text
    decided = server.engine.reviews.get_approval(tenant.org_id, approval_of(logged))
    assert (decided.status, decided.resolved_by, decided.reason) == (
        ApprovalStatus.REJECTED,
        reviewer.email,
        "wrong customer",
    )


def test_the_second_reviewer_to_decide_is_told_who_decided_first(
    server: RunningServer, tenant: Tenant, api: httpx.Client, reviewer: Account, as_reviewer: Visitor
) -> None:
    logged = held_action(api)
    as_reviewer.get("/dashboard/approvals")
    assert as_reviewer.post(f"/dashboard/approvals/{approval_of(logged)}/approve").status_code == 303
    with visitor(server, account(server, tenant, UserRole.REVIEWER)) as second:
        second.get("/dashboard/approvals")
        late = second.post(f"/dashboard/approvals/{approval_of(logged)}/reject", headers={"HX-Request": "true"})
        assert late.status_code == 200
        assert f"Already approved by {reviewer.email}" in late.text
    assert server.engine.reviews.get_approval(tenant.org_id, approval_of(logged)).status is ApprovalStatus.APPROVED


def test_the_live_queue_answers_no_content_until_something_changes(api: httpx.Client, as_reviewer: Visitor) -> None:
    first = as_reviewer.get("/dashboard/approvals/queue")
    version = re.search(r'class="queue-version" name="version" value="(\w+)"', first.text)
    assert version is not None
    assert as_reviewer.get(f"/dashboard/approvals/queue?version={version.group(1)}").status_code == 204
    logged = held_action(api)
    changed = as_reviewer.get(f"/dashboard/approvals/queue?version={version.group(1)}")
    assert changed.status_code == 200 and approval_of(logged) in changed.text


# sessions ----------------------------------------------------------------------------------------------------


def test_sessions_are_filtered_by_agent_and_status_and_paged(api: httpx.Client, as_reviewer: Visitor) -> None:
    ids = [api.post("/sessions", json={"agentId": "pager"}).json()["id"] for _ in range(27)]
    other = api.post("/sessions", json={"agentId": "loner"}).json()["id"]
    api.post(f"/sessions/{other}/complete")
    first = as_reviewer.get("/dashboard/sessions?agent=pager").text
    assert sum(i in first for i in ids) == 25 and other not in first
    next_page = re.search(r'href="/dashboard/sessions\?([^"]+)" rel="next"', first)
    assert next_page is not None
    second = as_reviewer.get("/dashboard/sessions?" + next_page.group(1).replace("&amp;", "&")).text
    assert sum(i in second for i in ids) == 2
    completed = as_reviewer.get("/dashboard/sessions?display_status=COMPLETED").text
    assert other in completed and ids[0] not in completed


def test_a_long_sessions_page_shows_its_first_hundred_actions_and_links_to_the_later_ones(
    api: httpx.Client, as_reviewer: Visitor
) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    body = {"connector": "http", "apiName": "POST /v1/x", "operationType": "CREATE", "payload": {}}
    made = [api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]["actionId"] for _ in range(130)]
    first = as_reviewer.get(f"/dashboard/sessions/{session_id}").text
    assert [a for a in made if f'id="action-{a}"' in first] == made[:100]
    later = re.search(rf'rel="next" href="(/dashboard/sessions/{session_id}\?cursor=[^"]+)"', first)
    assert later is not None and "130 in all" in first
    second = as_reviewer.get(later.group(1)).text
    assert [a for a in made if f'id="action-{a}"' in second] == made[100:]
    assert f'href="/dashboard/sessions/{session_id}">First actions' in second and 'rel="next"' not in second


def test_a_long_rollback_under_way_lists_its_steps_from_a_few_before_the_one_it_waits_on(
    api: httpx.Client, as_reviewer: Visitor
) -> None:
    nothing_to_undo = {"type": "none", "reason": "a note"}
    asks_first = {**DELETE_THING, "requireApproval": True}  # the rollback stops there until a reviewer decides
    calls = [("http", f"POST /v1/notes/{n}", "CREATE", nothing_to_undo) for n in range(300)]
    calls[119] = ("http", "POST /v1/things", "CREATE", asks_first)  # #120: the 181st step, last done first
    session_id = session_that_ran(api, *calls)
    assert api.post(f"/sessions/{session_id}/rollback", json={}).status_code in (200, 202)
    assert api.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()["status"] == "WAITING_APPROVAL"
    page = as_reviewer.get(f"/dashboard/sessions/{session_id}").text
    rollback = page[page.index('id="rollback"') : page.index("</section>", page.index('id="rollback"'))]
    assert "180 of 300</strong> undos dealt with" in rollback
    assert "175 undos dealt with before these" in rollback and '<ol class="chain" start="176">' in rollback
    steps = re.findall(r'<span class="step">#(\d+) ', rollback)
    assert steps == [str(seq) for seq in range(125, 25, -1)]  # five done, the one waiting, then those to do
    assert "and 25 more undos" in rollback


def test_a_long_rolled_back_sessions_page_shows_a_page_of_its_rollback_and_counts_the_rest(
    api: httpx.Client, as_reviewer: Visitor, as_admin: Visitor
) -> None:
    nothing_to_undo = {"type": "none", "reason": "a note"}
    session_id = session_that_ran(
        api, *[("http", f"POST /v1/notes/{n}", "CREATE", nothing_to_undo) for n in range(130)]
    )
    assert api.post(f"/sessions/{session_id}/rollback", json={}).status_code in (200, 202)
    assert api.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()["finishedAt"] is not None
    page = as_reviewer.get(f"/dashboard/sessions/{session_id}").text
    rollback = page[page.index('id="rollback"') : page.index("</section>", page.index('id="rollback"'))]
    assert "130 of 130</strong> undos dealt with" in rollback
    assert rollback.count("<li>") == 100 and "and 30 more undos" in rollback
    assert page.count('class="card" id="action-') == 100 and "130 in all" in page  # the timeline is paged too
    assert "Roll back…" not in as_admin.get(f"/dashboard/sessions/{session_id}").text  # nothing is left to undo


def test_an_undo_handed_to_the_agents_process_says_so_on_the_session_page_while_it_is_offered_and_taken(
    server: RunningServer, api: httpx.Client, tenant: Tenant, as_reviewer: Visitor
) -> None:
    # An MCP server the organisation's settings do not name: the server's rollback hands its undo over.
    calls = [{"tool": "delete_entities", "arguments": {"entityNames": ["ada"]}}]
    undo = {"type": "mcp-tools", "server": "memory", "calls": calls}
    session_id = session_that_ran(api, ("mcp", "memory.create_entities", "CREATE", undo))
    assert api.post(f"/sessions/{session_id}/rollback", json={}).status_code in (200, 202)
    offered = until_shown(as_reviewer, f"/dashboard/sessions/{session_id}", "Undo: offered to the agent&#39;s process")
    assert "the process that wrapped its client takes it; offered until" in offered
    with_agent = api.get(f"/sessions/{session_id}/rollback").json()["undoWithAgent"]  # the API says it too
    assert (with_agent["connector"], with_agent["taken"], with_agent["reportBy"]) == ("mcp", False, None)
    shown = re.search(r'id="session-version" name="version" value="([^"]*)"', offered)
    assert shown is not None
    taken = server.engine.rollbacks.claim_handed_undo(tenant.org_id, [session_id], ["mcp"], 0)  # as the agent would
    assert taken is not None
    # The page, polling while the rollback runs, is told of it: the undo's action itself has not changed.
    live = as_reviewer.get(f"/dashboard/sessions/{session_id}/live", params={"version": shown.group(1)})
    assert live.status_code == 200
    assert "Undo: running in the agent&#39;s process" in live.text and "it reports the outcome by" in live.text


def until_shown(visitor: Visitor, path: str, text: str) -> str:
    """The page at ``path`` once it shows ``text`` (a worker gets there meanwhile), within 30 s."""
    deadline = time.monotonic() + 30
    while text not in (page := visitor.get(path).text) and time.monotonic() < deadline:
        time.sleep(0.1)
    return page


def test_a_held_call_after_many_that_ran_lists_the_first_twenty_undos_and_says_how_many_more(
    api: httpx.Client, as_reviewer: Visitor
) -> None:
    session_id = session_that_ran(api, *[("http", f"POST /v1/things/{n}", "CREATE", DELETE_THING) for n in range(25)])
    body = {"connector": "http", "apiName": "POST /v1/refunds", "operationType": "CREATE", "payload": {}}
    logged = api.post(f"/sessions/{session_id}/actions", json={**body, "requiresApproval": True}).json()
    listed = api.get("/approvals", params={"status": "PENDING", "include": "consequences"}).json()
    (shown,) = [p for p in listed if p["approvalId"] == approval_of(logged)]
    reject = shown["consequences"]["reject"]
    assert [step["seq"] for step in reject["steps"]] == list(range(25, 5, -1)) and reject["moreSteps"] == 5
    assert "25 actions are undone" in reject["summary"]
    assert "and 5 more undos" in as_reviewer.get("/dashboard/approvals").text


def test_a_bad_filter_is_explained_not_an_error(as_reviewer: Visitor) -> None:
    for query in ("since=yesterday", "display_status=SHINY", "until=9999-12-31T23:59-14:00"):
        page = as_reviewer.get(f"/dashboard/sessions?{query}")
        assert page.status_code == 200
        assert 'class="message error"' in page.text


def test_only_an_admin_is_offered_a_rollback_and_only_while_there_is_something_to_undo(
    api: httpx.Client, as_admin: Visitor, as_reviewer: Visitor
) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    assert "Roll back…" not in as_admin.get(f"/dashboard/sessions/{session_id}").text  # nothing done yet
    body = {"connector": "http", "apiName": "POST /v1/x", "operationType": "CREATE", "payload": {}}
    action_id = api.post(f"/sessions/{session_id}/actions", json=body).json()["action"]["actionId"]
    api.patch(f"/sessions/{session_id}/actions/{action_id}", json={"status": "SUCCESS", "response": {}})
    assert "Roll back…" in as_admin.get(f"/dashboard/sessions/{session_id}").text
    assert "Roll back…" not in as_reviewer.get(f"/dashboard/sessions/{session_id}").text


def test_a_rollback_the_rules_refuse_is_explained_on_the_session_page(api: httpx.Client, as_admin: Visitor) -> None:
    session_id = api.post("/sessions", json={"agentId": "a"}).json()["id"]
    as_admin.get(f"/dashboard/sessions/{session_id}/rollback")
    refused = as_admin.post(f"/dashboard/sessions/{session_id}/rollback")
    assert refused.status_code == 303
    assert (
        "Not rolled back: the session has no SUCCESS action" in as_admin.get(f"/dashboard/sessions/{session_id}").text
    )


def test_the_rollback_confirmation_warns_that_undos_of_a_connector_not_enabled_cannot_run(
    server: RunningServer,
) -> None:
    fresh = server.tenant(http_undo=False)  # as on a new server: every connector starts disabled
    with (
        httpx.Client(base_url=fresh.url, headers={"Authorization": f"Bearer {fresh.key}"}) as api,
        visitor(server, account(server, fresh, UserRole.ADMIN)) as as_admin,
    ):
        session_id = session_that_ran(
            api,
            ("http", "POST /v1/things", "CREATE", DELETE_THING),
            ("http", "DELETE /v1/orders/ord_14", "DELETE", {"type": "none"}),
        )
        page = as_admin.get(f"/dashboard/sessions/{session_id}/rollback").text
        assert "1 of these undos cannot run on this server." in page
        assert "The rollback would stop at #1" in page
        assert "connector &#39;http&#39; is not enabled for this organisation" in page
        assert 'href="/dashboard/connectors#connector-http"' in page
        stays = r'#2 [^<]*</span>\s*→ <span class="stays">stays deleted: a delete has no inverse'
        assert re.search(stays, page)
        as_admin.get("/dashboard/connectors")
        as_admin.post("/dashboard/connectors/http", {"config.allowedHosts": "127.0.0.1"})
        assert "cannot run" not in as_admin.get(f"/dashboard/sessions/{session_id}/rollback").text


def test_the_rollback_confirmation_says_when_a_connector_has_no_server_side_undo(
    api: httpx.Client, as_admin: Visitor
) -> None:
    session_id = session_that_ran(api, ("todo", "items.create", "CREATE", {"type": "todo-delete", "id": "i1"}))
    page = as_admin.get(f"/dashboard/sessions/{session_id}/rollback").text
    assert "connector &#39;todo&#39; cannot run undos in the server" in page
    assert "connector-todo" not in page  # no settings would fix it: no link to them


def test_stored_settings_the_connector_refuses_are_named_before_the_rollback_and_fail_its_undo_alike(
    server: RunningServer, tenant: Tenant, api: httpx.Client, as_admin: Visitor
) -> None:
    refused = {"allowedHosts": ["127.0.0.1"], "allowedMethods": ["GET"]}  # stored past check_config
    server.engine.accounts.configure_connector(tenant.org_id, "http", enabled=True, config=refused, credentials=None)
    session_id = session_that_ran(api, ("http", "POST /v1/things", "CREATE", DELETE_THING))
    reason = (
        "the stored settings of connector 'http' are refused (config.allowedMethods: methods must be among "
        "POST, PUT, PATCH, DELETE); an operator corrects them on the dashboard's Connectors page"
    )
    assert reason.replace("'", "&#39;") in as_admin.get(f"/dashboard/sessions/{session_id}/rollback").text
    as_admin.post(f"/dashboard/sessions/{session_id}/rollback")
    assert api.get(f"/sessions/{session_id}/rollback", params={"wait": 30}).json()["status"] == "FAILED"
    (action,) = api.get(f"/sessions/{session_id}").json()["actions"]
    assert action["error"] == f"undo failed: {reason}"


def test_credentials_this_server_cannot_decrypt_are_named_before_the_rollback_and_can_be_typed_again(
    server: RunningServer, tenant: Tenant, api: httpx.Client, as_admin: Visitor
) -> None:
    other_key = Vault(Fernet.generate_key()).encrypt({"headers": {"Authorization": "Bearer old"}})
    loopback = {"allowedHosts": ["127.0.0.1"]}
    server.engine.accounts.configure_connector(
        tenant.org_id, "http", enabled=True, config=loopback, credentials=other_key
    )
    session_id = session_that_ran(api, ("http", "POST /v1/things", "CREATE", DELETE_THING))
    page = as_admin.get(f"/dashboard/sessions/{session_id}/rollback")
    assert page.status_code == 200 and "cannot be decrypted with this secret key" in page.text
    assert as_admin.get("/dashboard/connectors").status_code == 200
    as_admin.post("/dashboard/connectors/http", {"config.allowedHosts": "127.0.0.1", "credentials.headers": "A: b"})
    assert "cannot run" not in as_admin.get(f"/dashboard/sessions/{session_id}/rollback").text


# admin pages -------------------------------------------------------------------------------------------------


def test_a_policy_is_previewed_added_disabled_and_deleted(
    server: RunningServer, tenant: Tenant, api: httpx.Client, as_admin: Visitor
) -> None:
    session_id = api.post("/sessions", json={"agentId": "billing-agent"}).json()["id"]
    for api_name, kind in (("DELETE /v1/customers/1", "DELETE"), ("POST /v1/orders", "CREATE")):
        body = {"connector": "http", "apiName": api_name, "operationType": kind, "payload": {}}
        api.post(f"/sessions/{session_id}/actions", json=body)
    as_admin.get("/dashboard/policies")
    preview = as_admin.post("/dashboard/policies/preview", {"operation_type": "DELETE", "agent_id": "billing-*"}).text
    assert "1 of the latest 200 actions" in preview and "DELETE /v1/customers/1" in preview
    assert "POST /v1/orders" not in preview
    assert "matches no operation type" in as_admin.post("/dashboard/policies/preview", {"operation_type": "ERASE"}).text
    added = as_admin.post("/dashboard/policies", {"name": "no deletes", "effect": "BLOCK", "operation_type": "DELETE"})
    assert added.status_code == 303
    (policy,) = server.engine.policies.list_policies(tenant.org_id)
    assert (policy.name, policy.effect, policy.operation_type, policy.connector) == (
        "no deletes",
        "BLOCK",
        "DELETE",
        None,
    )
    as_admin.get("/dashboard/policies")
    as_admin.post(f"/dashboard/policies/{policy.policy_id}/enabled", {"enabled": "false"})
    assert not server.engine.policies.list_policies(tenant.org_id)[0].enabled
    duplicate = as_admin.post("/dashboard/policies", {"name": "no deletes", "effect": "BLOCK"})
    assert duplicate.status_code == 400 and "already exists" in duplicate.text
    as_admin.post(f"/dashboard/policies/{policy.policy_id}/delete")
    assert server.engine.policies.list_policies(tenant.org_id) == []


def test_connector_settings_are_typed_in_a_form_and_stored_as_the_rest_api_takes_them(
    server: RunningServer, tenant: Tenant, api: httpx.Client, as_admin: Visitor
) -> None:
    page = as_admin.get("/dashboard/connectors").text
    http = page[page.index('id="connector-http"') :].split("</section>")[0]
    for field in ("config.allowedHosts", "config.allowedMethods", "config.allowedPaths", "credentials.headers"):
        assert f'name="{field}"' in http, field
    assert "apiKey" not in http  # the JSON placeholder of another connector's credentials is gone
    saved = as_admin.post(
        "/dashboard/connectors/http",
        {
            "config.allowedHosts": "api.example.com\n  *.example.com  \n\n",
            "config.allowedMethods": "DELETE\nPOST",
            "credentials.headers": "Authorization: Bearer s3cret\nX-Team: billing",
        },
    )
    assert saved.status_code == 303
    shown = api.get("/connectors/http").json()
    assert shown["enabled"] and shown["hasCredentials"]
    assert shown["config"] == {
        "allowedHosts": ["api.example.com", "*.example.com"],
        "allowedMethods": ["DELETE", "POST"],
    }
    stored = server.engine.accounts.connector_config(tenant.org_id, "http")
    assert stored is not None and server.services.vault.decrypt(stored.credentials) == {
        "headers": {"Authorization": "Bearer s3cret", "X-Team": "billing"}
    }
    page = as_admin.get(saved.headers["location"]).text
    assert "http enabled." in page and "api.example.com\n*.example.com</textarea>" in page  # one per line
    assert "s3cret" not in page and "X-Team" not in page  # secrets are never shown back


def test_connector_secrets_are_kept_when_left_empty_and_removed_when_asked(
    server: RunningServer, tenant: Tenant, as_admin: Visitor
) -> None:
    as_admin.get("/dashboard/connectors")
    hosts = {"config.allowedHosts": "api.example.com"}
    as_admin.post("/dashboard/connectors/http", {**hosts, "credentials.headers": "Authorization: Bearer s3cret"})
    as_admin.post("/dashboard/connectors/http", {"config.allowedHosts": "api.example.com\nx.example.com"})
    kept = server.engine.accounts.connector_config(tenant.org_id, "http")
    assert kept is not None and kept.config == {"allowedHosts": ["api.example.com", "x.example.com"]}
    assert server.services.vault.decrypt(kept.credentials) == {"headers": {"Authorization": "Bearer s3cret"}}
    assert "Remove the stored headers" in as_admin.get("/dashboard/connectors").text
    as_admin.post("/dashboard/connectors/http", {**hosts, "forget.headers": "on"})
    forgotten = server.engine.accounts.connector_config(tenant.org_id, "http")
    assert forgotten is not None and server.services.vault.decrypt(forgotten.credentials) == {}
    as_admin.post("/dashboard/connectors/http/disable")
    disabled = server.engine.accounts.connector_config(tenant.org_id, "http")
    assert disabled is not None and not disabled.enabled and disabled.config == {"allowedHosts": ["api.example.com"]}


def test_a_refused_connector_form_says_why_beside_the_field_and_keeps_what_was_typed_but_its_secrets(
    server: RunningServer, tenant: Tenant, as_admin: Visitor
) -> None:
    as_admin.get("/dashboard/connectors")
    before = server.engine.accounts.connector_config(tenant.org_id, "http")
    refused = as_admin.post(
        "/dashboard/connectors/http",
        {
            "config.allowedHosts": "api.example.com\nx.example.com",
            "config.allowedMethods": "GET",
            "credentials.headers": "Authorization: Bearer s3cret",
        },
    )
    assert refused.status_code == 400
    page = refused.text
    assert "http not enabled: config.allowedMethods: methods must be among POST, PUT, PATCH, DELETE" in page
    assert "api.example.com\nx.example.com</textarea>" in page and ">GET</textarea>" in page
    field = re.search(r'<textarea id="http-config-allowedMethods"[^>]*>', page)
    assert field is not None and 'aria-invalid="true"' in field.group(0)
    assert "s3cret" not in page
    assert server.engine.accounts.connector_config(tenant.org_id, "http") == before  # nothing was stored
    unreadable = as_admin.post("/dashboard/connectors/http", {"credentials.headers": "Bearer s3cret"})
    assert unreadable.status_code == 400 and "credentials.headers: line 1 is not Name: value" in unreadable.text
    assert "s3cret" not in unreadable.text


def test_stripe_is_saved_with_its_stored_key_kept_and_can_always_be_disabled(
    server: RunningServer, tenant: Tenant, as_admin: Visitor
) -> None:
    as_admin.get("/dashboard/connectors")
    missing = as_admin.post("/dashboard/connectors/stripe", {"config.apiBase": "https://stripe.example.com"})
    assert missing.status_code == 400 and "stripe not enabled: credentials.apiKey" in missing.text
    assert 'value="https://stripe.example.com"' in missing.text
    as_admin.post("/dashboard/connectors/stripe", {"credentials.apiKey": "sk_test_1"})
    again = as_admin.post("/dashboard/connectors/stripe", {})
    assert "stripe enabled." in as_admin.get(again.headers["location"]).text
    disabled = as_admin.post("/dashboard/connectors/stripe/disable")
    assert "stripe disabled." in as_admin.get(disabled.headers["location"]).text
    stored = server.engine.accounts.connector_config(tenant.org_id, "stripe")
    assert stored is not None and not stored.enabled
    assert server.services.vault.decrypt(stored.credentials) == {"apiKey": "sk_test_1"}


def test_an_api_address_on_a_private_address_is_refused_beside_its_field(
    server: RunningServer, tenant: Tenant, as_admin: Visitor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV)
    as_admin.get("/dashboard/connectors")
    typed = {"config.apiBase": "http://127.0.0.1:18204", "credentials.apiKey": "sk_test_1"}
    refused = as_admin.post("/dashboard/connectors/stripe", typed)
    assert refused.status_code == 400 and "stripe not enabled: config.apiBase: the host" in refused.text
    assert "is a private or local address (127.0.0.1)" in refused.text and ALLOW_PRIVATE_ENV in refused.text
    field = re.search(r'<input id="stripe-config-apiBase"[^>]*>', refused.text)
    assert field is not None and 'aria-invalid="true"' in field.group(0)
    assert server.engine.accounts.connector_config(tenant.org_id, "stripe") is None


def test_a_refused_policy_keeps_what_was_typed(as_admin: Visitor) -> None:
    as_admin.get("/dashboard/policies")
    typed = {
        "name": "approve refunds",
        "effect": "REQUIRE_APPROVAL",
        "before_execution": "on",
        "timeout_minutes": "soon",
        "connector": "stripe",
        "api_name": "refunds.*",
        "agent_id": "billing-*",
        "operation_type": "CREATE",
    }
    refused = as_admin.post("/dashboard/policies", typed)
    assert refused.status_code == 400
    assert "Policy not added: timeout_minutes: &#39;soon&#39; is not a number" in refused.text
    for name in ("name", "timeout_minutes", "connector", "api_name", "agent_id", "operation_type"):
        assert re.search(rf'<input id="{name}" name="{name}"[^>]* value="{re.escape(typed[name])}"', refused.text), name
    assert '<option value="REQUIRE_APPROVAL" selected>' in refused.text
    assert re.search(r'<input type="checkbox" id="before_execution"[^>]* checked>', refused.text)


def test_a_refused_user_keeps_the_email_and_role_but_not_the_password(as_admin: Visitor) -> None:
    as_admin.get("/dashboard/users")
    refused = as_admin.post("/dashboard/users", {"email": "ada@example.org", "role": "admin", "password": "short pw"})
    assert refused.status_code == 400 and "User not added" in refused.text
    assert 'value="ada@example.org"' in refused.text and '<option value="admin" selected>' in refused.text
    assert "short pw" not in refused.text


def test_a_form_posted_after_the_sign_in_ended_returns_to_its_page_after_signing_in(
    server: RunningServer, api: httpx.Client, admin: Account, as_admin: Visitor
) -> None:
    logged = held_action(api)
    as_admin.get("/dashboard/approvals")
    (user,) = [u for u in server.engine.accounts.list_users(admin.tenant.org_id) if u.email == admin.email]
    server.engine.accounts.end_sign_ins(admin.tenant.org_id, user.user_id)
    late = as_admin.post(
        f"/dashboard/approvals/{approval_of(logged)}/approve", headers={"referer": f"{server.url}/dashboard/approvals"}
    )
    assert late.status_code == 303
    assert late.headers["location"] == "/dashboard/login?next=%2Fdashboard%2Fapprovals"


def test_a_new_api_key_is_shown_once_works_and_stops_when_revoked(tenant: Tenant, as_admin: Visitor) -> None:
    as_admin.get("/dashboard/keys")
    created = as_admin.post("/dashboard/keys", {"role": "agent"})
    assert created.status_code == 303  # so that reloading the page makes no second key
    secret = re.search(r'<code class="secret">(ar_[\w-]+)</code>', as_admin.get(created.headers["location"]).text)
    assert secret is not None
    agent = httpx.Client(base_url=tenant.url, headers={"Authorization": f"Bearer {secret.group(1)}"})
    assert agent.post("/sessions", json={"agentId": "a"}).status_code == 201
    listing = as_admin.get("/dashboard/keys").text
    assert secret.group(1) not in listing
    key_id = re.findall(r'action="/dashboard/keys/(key_\w+)/revoke"', listing)[-1]
    as_admin.post(f"/dashboard/keys/{key_id}/revoke")
    assert agent.post("/sessions", json={"agentId": "a"}).status_code == 401


def test_an_admin_adds_a_reviewer_who_can_sign_in_and_the_last_admin_stays(
    server: RunningServer, tenant: Tenant, admin: Account, as_admin: Visitor
) -> None:
    as_admin.get("/dashboard/users")
    added = as_admin.post(
        "/dashboard/users", {"email": "new@example.org", "role": "reviewer", "password": "long enough pw"}
    )
    assert "new@example.org can now sign in as reviewer" in as_admin.get(added.headers["location"]).text
    with visitor(server, Account("new@example.org", "long enough pw", tenant)) as v:
        assert v.get("/dashboard/approvals").status_code == 200
    short = as_admin.post("/dashboard/users", {"email": "x@example.org", "role": "reviewer", "password": "short"})
    assert short.status_code == 400 and "at least 10 characters" in short.text
    (me,) = [u for u in server.engine.accounts.list_users(tenant.org_id) if u.email == admin.email]
    refused = as_admin.post(f"/dashboard/users/{me.user_id}/delete")
    assert "last admin" in as_admin.get(refused.headers["location"]).text
    assert me in server.engine.accounts.list_users(tenant.org_id)


def test_an_admin_sets_what_drift_leads_to_the_verifier_and_the_webhook_hosts(
    server: RunningServer, tenant: Tenant, as_admin: Visitor
) -> None:
    as_admin.get("/dashboard/settings")
    form = {
        "on_drift": "rollback",
        "verifier_url": "https://llm.example.com/v1",
        "verifier_model": "judge",
        "verifier_api_key": "sk-verifier-1",
        "webhook_hosts": "hooks.example.com\n*.example.org\n",
    }
    saved = as_admin.post("/dashboard/settings", form)
    page = as_admin.get(saved.headers["location"]).text
    assert "Settings saved." in page and "sk-verifier-1" not in page and "A key is stored" in page
    settings = server.engine.accounts.settings(tenant.org_id)
    assert (settings.on_drift, settings.verifier_url, settings.verifier_model) == (
        "rollback",
        form["verifier_url"],
        "judge",
    )
    assert settings.webhook_hosts == ["hooks.example.com", "*.example.org"]
    assert server.services.vault.decrypt_text(settings.verifier_api_key) == "sk-verifier-1"
    as_admin.post("/dashboard/settings", {**form, "verifier_api_key": ""})
    assert (
        server.services.vault.decrypt_text(server.engine.accounts.settings(tenant.org_id).verifier_api_key)
        == "sk-verifier-1"
    )
    as_admin.post("/dashboard/settings", {**form, "verifier_api_key": "", "forget_verifier_api_key": "on"})
    assert server.engine.accounts.settings(tenant.org_id).verifier_api_key is None
    refused = as_admin.post("/dashboard/settings", {**form, "on_drift": "panic"})
    assert "Settings not saved: onDrift" in as_admin.get(refused.headers["location"]).text


def test_an_admin_adds_a_webhook_sees_its_secret_once_and_follows_its_deliveries(
    server: RunningServer, tenant: Tenant, api: httpx.Client, as_admin: Visitor
) -> None:
    as_admin.get("/dashboard/webhooks")
    not_allowed = as_admin.post(
        "/dashboard/webhooks", {"url": "http://127.0.0.1:9/hook", "events": "approval.requested"}
    )
    assert "no webhook hosts are allowed yet" in as_admin.get(not_allowed.headers["location"]).text
    as_admin.post("/dashboard/settings", {"on_drift": "review", "webhook_hosts": "127.0.0.1"})
    added = as_admin.post(
        "/dashboard/webhooks",
        {"url": "http://127.0.0.1:9/hook", "events": ["approval.requested", "approval.decided"], "format": "slack"},
    )
    page = as_admin.get(added.headers["location"]).text
    secret = re.search(r'<code class="secret">(whsec_[\w-]+)</code>', page)
    assert secret is not None and secret.group(1) not in as_admin.get("/dashboard/webhooks").text
    (hook,) = server.engine.outbox.list_webhooks(tenant.org_id)
    assert hook.events == ["approval.decided", "approval.requested"] and hook.format == "slack"
    held_action(api)
    log = as_admin.get(f"/dashboard/webhooks/{hook.webhook_id}").text
    assert "approval.requested" in log
    assert as_admin.get("/dashboard/webhooks/whk_nope").status_code == 404
    as_admin.post(f"/dashboard/webhooks/{hook.webhook_id}/delete")
    assert server.engine.outbox.list_webhooks(tenant.org_id) == []


# one wording for an action and its undo -----------------------------------------------------------------------


def test_the_session_page_and_the_rollback_confirmation_word_an_action_and_its_undo_as_its_connector_does(
    server: RunningServer, tenant: Tenant, api: httpx.Client, as_admin: Visitor
) -> None:
    session_id = session_that_ran(api, ("http", "POST /v1/things", "CREATE", DELETE_THING))
    (action,) = server.engine.recording.get_session(tenant.org_id, session_id).actions
    said = server.engine.reviews.words(action)
    page = as_admin.get(f"/dashboard/sessions/{session_id}").text
    confirm = as_admin.get(f"/dashboard/sessions/{session_id}/rollback").text
    for shown in (page, confirm):
        assert f"#1 {said.description}</" in shown and said.undo.how in shown
        assert "#1 CREATE" not in shown and "→ <code>http-delete</code>" not in shown
    assert "<pre>http-delete\n{" in page  # the undo's type on a line of its own, then its parameters


def test_a_session_whose_only_pending_approvals_are_reviews_is_under_review_and_its_card_says_what_expiry_does(
    api: httpx.Client, as_reviewer: Visitor
) -> None:
    policy = {"name": "review things", "effect": "REQUIRE_APPROVAL", "apiName": "POST /v1/things"}
    assert api.post("/policies", json=policy).status_code == 201
    session_id = session_that_ran(api, ("http", "POST /v1/things", "CREATE", DELETE_THING))
    page = as_reviewer.get(f"/dashboard/sessions/{session_id}").text
    assert "Under review" in page and "Waiting for approval" not in page
    queue = as_reviewer.get("/dashboard/approvals").text
    assert "when it runs out, the call stays as it ran" in queue


def test_the_sessions_list_says_under_review_for_reviews_alone_and_waiting_for_approval_for_a_held_call(
    api: httpx.Client, as_reviewer: Visitor
) -> None:
    policy = {"name": "review things", "effect": "REQUIRE_APPROVAL", "apiName": "POST /v1/things"}
    assert api.post("/policies", json=policy).status_code == 201
    reviewed = session_that_ran(api, ("http", "POST /v1/things", "CREATE", DELETE_THING))
    held = held_action(api)["action"]["sessionId"]
    rows = {
        row.split('href="/dashboard/sessions/', 1)[1].split('"', 1)[0]: row
        for row in as_reviewer.get("/dashboard/sessions").text.split("<tr")
        if 'href="/dashboard/sessions/' in row
    }
    assert "Under review" in rows[reviewed] and "Waiting for approval" not in rows[reviewed]
    assert "Waiting for approval" in rows[held] and "Under review" not in rows[held]
