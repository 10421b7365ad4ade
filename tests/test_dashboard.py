"""The dashboard over plain HTTP, as a browser without JavaScript sees it: signing in, who may see and do
what, CSRF, escaping, and each page's forms. (What needs JavaScript is in test_dashboard_browser.py.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from dashboard import HOSTILE, PASSWORD, Account, Visitor, account, visitor
from serving import RunningServer, Tenant

from agentrein_core.statuses import ApprovalStatus, UserRole
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
    (user,) = [u for u in server.engine.list_users(tenant.org_id) if u.role is UserRole.REVIEWER]
    server.engine.delete_user(tenant.org_id, user.user_id)
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
    assert server.engine.list_policies(tenant.org_id) == []


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
    assert server.engine.list_policies(tenant.org_id) == []
    assert len(server.engine.list_api_keys(tenant.org_id)) == 1


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
    assert server.engine.get_approval(tenant.org_id, approval_of(logged)).status is ApprovalStatus.PENDING


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


def test_a_decision_is_recorded_with_the_signed_in_reviewer_and_reason(
    server: RunningServer, api: httpx.Client, tenant: Tenant, reviewer: Account, as_reviewer: Visitor
) -> None:
    logged = held_action(api)
    as_reviewer.get("/dashboard/approvals")
    answer = as_reviewer.post(f"/dashboard/approvals/{approval_of(logged)}/reject", {"reason": "wrong customer"})
    assert answer.status_code == 303
    assert "You rejected this request." in as_reviewer.get("/dashboard/approvals").text
    decided = server.engine.get_approval(tenant.org_id, approval_of(logged))
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
    assert server.engine.get_approval(tenant.org_id, approval_of(logged)).status is ApprovalStatus.APPROVED


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
    (policy,) = server.engine.list_policies(tenant.org_id)
    assert (policy.name, policy.effect, policy.operation_type, policy.connector) == (
        "no deletes",
        "BLOCK",
        "DELETE",
        None,
    )
    as_admin.get("/dashboard/policies")
    as_admin.post(f"/dashboard/policies/{policy.policy_id}/enabled", {"enabled": "false"})
    assert not server.engine.list_policies(tenant.org_id)[0].enabled
    duplicate = as_admin.post("/dashboard/policies", {"name": "no deletes", "effect": "BLOCK"})
    assert "already exists" in as_admin.get(duplicate.headers["location"]).text
    as_admin.post(f"/dashboard/policies/{policy.policy_id}/delete")
    assert server.engine.list_policies(tenant.org_id) == []


def test_connector_credentials_are_write_only_and_kept_when_left_empty(
    server: RunningServer, tenant: Tenant, as_admin: Visitor
) -> None:
    as_admin.get("/dashboard/connectors")
    config = '{"allowedHosts": ["api.example.com"]}'
    saved = as_admin.post(
        "/dashboard/connectors/http",
        {"config": config, "credentials": '{"headers": {"Authorization": "Bearer s3cret"}}'},
    )
    page = as_admin.get(saved.headers["location"]).text
    assert "http enabled." in page and "credentials stored" in page and "api.example.com" in page
    assert "s3cret" not in page
    stored = server.engine.connector_config(tenant.org_id, "http")
    assert stored is not None and stored.credentials and "s3cret" not in stored.credentials
    as_admin.post("/dashboard/connectors/http", {"config": config, "credentials": ""})
    kept = server.engine.connector_config(tenant.org_id, "http")
    assert kept is not None and server.services.vault.decrypt(kept.credentials) == {
        "headers": {"Authorization": "Bearer s3cret"}
    }
    broken = as_admin.post("/dashboard/connectors/http", {"config": "{not json", "credentials": ""})
    assert "not enabled: config: is not valid JSON" in as_admin.get(broken.headers["location"]).text
    deep = as_admin.post("/dashboard/connectors/http", {"config": "[" * 100_000, "credentials": ""})
    assert "config: is nested too deeply" in as_admin.get(deep.headers["location"]).text
    as_admin.post("/dashboard/connectors/http/disable")
    disabled = server.engine.connector_config(tenant.org_id, "http")
    assert disabled is not None and not disabled.enabled and disabled.credentials == kept.credentials


def test_stripe_is_saved_with_its_stored_key_kept_and_can_always_be_disabled(
    server: RunningServer, tenant: Tenant, as_admin: Visitor
) -> None:
    as_admin.get("/dashboard/connectors")
    missing = as_admin.post("/dashboard/connectors/stripe", {"config": "{}", "credentials": ""})
    assert "stripe not enabled" in as_admin.get(missing.headers["location"]).text
    as_admin.post("/dashboard/connectors/stripe", {"config": "{}", "credentials": '{"apiKey": "sk_test_1"}'})
    again = as_admin.post("/dashboard/connectors/stripe", {"config": "{}", "credentials": ""})
    assert "stripe enabled." in as_admin.get(again.headers["location"]).text
    disabled = as_admin.post("/dashboard/connectors/stripe/disable")
    assert "stripe disabled." in as_admin.get(disabled.headers["location"]).text
    stored = server.engine.connector_config(tenant.org_id, "stripe")
    assert stored is not None and not stored.enabled
    assert server.services.vault.decrypt(stored.credentials) == {"apiKey": "sk_test_1"}


def test_a_form_posted_after_the_sign_in_ended_returns_to_its_page_after_signing_in(
    server: RunningServer, api: httpx.Client, admin: Account, as_admin: Visitor
) -> None:
    logged = held_action(api)
    as_admin.get("/dashboard/approvals")
    (user,) = [u for u in server.engine.list_users(admin.tenant.org_id) if u.email == admin.email]
    server.engine.end_sign_ins(admin.tenant.org_id, user.user_id)
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
    assert "at least 10 characters" in as_admin.get(short.headers["location"]).text
    (me,) = [u for u in server.engine.list_users(tenant.org_id) if u.email == admin.email]
    refused = as_admin.post(f"/dashboard/users/{me.user_id}/delete")
    assert "last admin" in as_admin.get(refused.headers["location"]).text
    assert me in server.engine.list_users(tenant.org_id)


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
    settings = server.engine.settings(tenant.org_id)
    assert (settings.on_drift, settings.verifier_url, settings.verifier_model) == (
        "rollback",
        form["verifier_url"],
        "judge",
    )
    assert settings.webhook_hosts == ["hooks.example.com", "*.example.org"]
    assert server.services.vault.decrypt_text(settings.verifier_api_key) == "sk-verifier-1"
    as_admin.post("/dashboard/settings", {**form, "verifier_api_key": ""})
    assert server.services.vault.decrypt_text(server.engine.settings(tenant.org_id).verifier_api_key) == "sk-verifier-1"
    as_admin.post("/dashboard/settings", {**form, "verifier_api_key": "", "forget_verifier_api_key": "on"})
    assert server.engine.settings(tenant.org_id).verifier_api_key is None
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
    (hook,) = server.engine.list_webhooks(tenant.org_id)
    assert hook.events == ["approval.decided", "approval.requested"] and hook.format == "slack"
    held_action(api)
    log = as_admin.get(f"/dashboard/webhooks/{hook.webhook_id}").text
    assert "approval.requested" in log
    assert as_admin.get("/dashboard/webhooks/whk_nope").status_code == 404
    as_admin.post(f"/dashboard/webhooks/{hook.webhook_id}/delete")
    assert server.engine.list_webhooks(tenant.org_id) == []
