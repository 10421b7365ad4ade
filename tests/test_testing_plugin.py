"""agentrein-testing's pytest plugin, used as a third party uses it: a project of its own (made by pytester, none of
this repository's conftest in sight) whose tests ask for the fixtures by name and import nothing to get them."""

from __future__ import annotations

import re
import textwrap
from importlib.metadata import entry_points

import pytest

FIXTURES = (
    "agentrein",
    "agentrein_database_url",
    "agentrein_journal_path",
    "fake_stripe",
    "fake_github",
    "fake_http_service",
)


def run(pytester: pytest.Pytester, source: str) -> pytest.RunResult:
    pytester.makepyfile(test_third_party=textwrap.dedent(source))
    return pytester.runpytest("-p", "no:cacheprovider")


def test_installing_the_distribution_registers_the_plugin_and_its_fixtures(pytester: pytest.Pytester) -> None:
    (entry,) = [ep for ep in entry_points(group="pytest11") if ep.name == "agentrein"]
    assert entry.value == "agentrein_testing.plugin"
    listed = pytester.runpytest("--fixtures", "-p", "no:cacheprovider").stdout.str()
    for name in FIXTURES:
        assert re.search(rf"^{name} -- .*agentrein_testing[/\\]plugin\.py", listed, re.M), name


def test_the_agentrein_fixture_records_on_a_database_in_the_tests_own_directory(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import httpx
        from agentrein import ActionStatus

        def test_a_wrapped_call_is_recorded_then_rolled_back(agentrein, agentrein_database_url, tmp_path,
                                                             fake_http_service):
            assert agentrein_database_url == f"sqlite:///{tmp_path / 'agentrein.db'}"
            session = agentrein.new_session(agent_id="billing", intent="one order")
            orders = agentrein.wrap(httpx.Client(base_url=fake_http_service.base_url), session, connector="http")
            orders.post("/v1/orders", json={"sku": "A1"})
            assert [a.api_name for a in agentrein.get_session(session).actions] == ["POST /v1/orders"]
            assert [a.status for a in agentrein.rollback_session(session).actions] == [ActionStatus.ROLLED_BACK]
            assert fake_http_service.collection("orders") == {}
        """,
    )
    result.assert_outcomes(passed=1)


def test_tests_sharing_an_overridden_database_each_get_an_organisation_of_their_own(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import pytest

        @pytest.fixture(scope="module")
        def shared(tmp_path_factory):
            return f"sqlite:///{tmp_path_factory.mktemp('shared') / 'agentrein.db'}"

        @pytest.fixture
        def agentrein_database_url(shared):
            return shared

        def test_first_blocks_refunds(agentrein):
            agentrein.add_policy(name="no refunds", effect="BLOCK", api_name="POST /v1/refunds")
            assert len(agentrein.list_policies()) == 1

        def test_second_sees_no_policy(agentrein, shared):
            assert agentrein.database_url == shared
            assert agentrein.list_policies() == []
        """,
    )
    result.assert_outcomes(passed=2)


def test_the_fake_stripe_fixture_answers_the_real_stripe_sdk(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import stripe

        def test_a_customer_is_created(fake_stripe):
            api = {"api": fake_stripe.base_url}
            client = stripe.StripeClient("sk_test_x", base_addresses=api, max_network_retries=0)
            customer = client.v1.customers.create(params={"email": "a@example.com"})
            assert [c["id"] for c in fake_stripe.objects("customer")] == [customer.id]
        """,
    )
    result.assert_outcomes(passed=1)


def test_the_fake_github_fixture_answers_pygithub_with_the_documented_token(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import github

        def test_an_issue_is_opened(fake_github):
            fake_github.add_repo("acme", "shop")
            gh = github.Github(auth=github.Auth.Token("ghp_test"), base_url=fake_github.base_url, retry=None)
            gh.get_repo("acme/shop").create_issue("Broken checkout")
            assert [i["title"] for i in fake_github.issues("acme", "shop")] == ["Broken checkout"]
            assert fake_github.issues("acme", "shop")[0]["user"]["login"] == "octocat"
        """,
    )
    result.assert_outcomes(passed=1)


def test_the_fake_http_service_fixture_replays_a_repeated_idempotency_key(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import httpx

        def test_one_order_for_two_posts(fake_http_service):
            with httpx.Client(base_url=fake_http_service.base_url) as http:
                first = http.post("/v1/orders", json={"sku": "A1"}, headers={"Idempotency-Key": "k1"})
                again = http.post("/v1/orders", json={"sku": "A1"}, headers={"Idempotency-Key": "k1"})
            assert first.json() == again.json()
            assert len(fake_http_service.collection("orders")) == 1
        """,
    )
    result.assert_outcomes(passed=1)


def test_every_fake_is_stopped_after_its_test(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import httpx
        import pytest

        urls = []

        def test_serving(fake_stripe, fake_github, fake_http_service):
            urls.extend(fake.base_url for fake in (fake_stripe, fake_github, fake_http_service))

        def test_stopped():
            for url in urls:
                with pytest.raises(httpx.ConnectError):
                    httpx.get(url)
        """,
    )
    result.assert_outcomes(passed=2)
