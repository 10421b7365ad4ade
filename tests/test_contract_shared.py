"""The Python connectors keep the shared contract (contract/connectors.json), the one the TypeScript connectors
keep too (sdk-ts/test/contract.test.ts): every call in the fixture, made as a Python user writes it through the
real stripe and PyGithub clients against the loopback fakes, gets the canonical name, operation type and undo
config the fixture says, and every injected fault is or is not worth retrying as it says."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import github
import httpx
import pytest
import stripe

from agentrein_core.connector import Connector, PreparedCall
from agentrein_github import GitHubConnector
from agentrein_http import HttpConnector
from agentrein_stripe import StripeConnector
from agentrein_testing import FakeGitHub, FakeService, FakeStripe

CONTRACT = json.loads((Path(__file__).parents[1] / "contract" / "connectors.json").read_text())
WORLDS = CONTRACT["worlds"]
CONNECTORS: dict[str, Connector] = {"stripe": StripeConnector(), "github": GitHubConnector(), "http": HttpConnector()}
#: ``{result.id}``, ``{customer.id}``, ``{main.commit.sha}``, ``{run}``, ``{key}``, ``{fake}`` (contract/README.md)
PLACEHOLDER = re.compile(r"\{(run|key|fake|[A-Za-z_]+(?:\.[A-Za-z_]+)+)\}")


def _forms() -> list[Any]:
    return [
        pytest.param(case, form, id=f"{case['name']} / python {n + 1}")
        for case in CONTRACT["cases"]
        if case["connector"] in CONNECTORS
        for n, form in enumerate(case["python"])
    ]


class Values:
    """What placeholders stand for in one run of one call form."""

    def __init__(self, fake: str) -> None:
        self.named: dict[str, Any] = {"run": uuid.uuid4().hex[:8], "key": f"contract-{uuid.uuid4().hex}", "fake": fake}

    def resolve(self, value: Any) -> Any:
        """``value`` with its placeholders replaced: a string that is one placeholder takes the value's own type."""
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, str):
            return value
        whole = PLACEHOLDER.fullmatch(value)
        if whole:
            return self._lookup(whole.group(1))
        return PLACEHOLDER.sub(lambda m: str(self._lookup(m.group(1))), value)

    def _lookup(self, name: str) -> Any:
        head, *rest = name.split(".")
        value = self.named[head]
        for part in rest:
            value = value[part]
        return value


class World:
    """The fakes a run talks to, seeded as the contract's ``worlds`` say."""

    def __init__(self, stripe_fake: FakeStripe, github_fake: FakeGitHub, service: FakeService) -> None:
        self.stripe, self.github, self.service = stripe_fake, github_fake, service
        self.http_client = httpx.Client()
        self.stripe_client = stripe.StripeClient(
            WORLDS["stripe"]["apiKey"], base_addresses={"api": stripe_fake.base_url}, max_network_retries=0
        )
        self.github_client = github.Github(
            auth=github.Auth.Token(WORLDS["github"]["token"]),
            base_url=github_fake.base_url,
            retry=None,
            seconds_between_requests=None,
            seconds_between_writes=None,
        )

    def given(self, connector: str, steps: list[dict[str, Any]], values: Values) -> None:
        """The contract's ``given`` steps, sent as plain HTTP (no connector in the way)."""
        for step in steps:
            path, body = values.resolve(step["path"]), values.resolve(step.get("body"))
            url = self.base_url(connector) + path
            if connector == "stripe":
                headers = {"Authorization": f"Bearer {WORLDS['stripe']['apiKey']}"}
                answer = httpx.request(step["method"], url, data=body, headers=headers)
            else:
                headers = {"Authorization": f"token {WORLDS['github']['token']}"} if connector == "github" else {}
                answer = httpx.request(step["method"], url, json=body, headers=headers)
            assert answer.is_success, (step, answer.text)
            values.named[step["as"]] = answer.json()

    def prepare(self, connector: str, form: dict[str, Any], values: Values) -> PreparedCall | None:
        """``form`` described by its connector, on the object it is called on."""
        target: Any
        if connector == "stripe":
            target = stripe if form.get("module") else self.stripe_client
        elif connector == "http":
            target = self.http_client
        else:
            target = self.github_client
            for method, *args in form.get("reach", []):
                target = getattr(target, method)(*values.resolve(args))
        args, kwargs = values.resolve(form.get("args", [])), values.resolve(form.get("kwargs", {}))
        return CONNECTORS[connector].prepare(target, tuple(form["path"]), tuple(args), kwargs)

    def base_url(self, connector: str) -> str:
        fakes: dict[str, FakeStripe | FakeGitHub | FakeService] = {
            "stripe": self.stripe,
            "github": self.github,
            "http": self.service,
        }
        return fakes[connector].base_url

    def keys_sent(self, connector: str) -> list[str | None]:
        fake = self.stripe if connector == "stripe" else self.service
        return [call.idempotency_key for call in fake.calls()]

    def bodies_sent(self) -> list[Any]:
        return [call.body for call in self.github.calls("POST")]

    def fail_next(self, connector: str, fault: dict[str, Any]) -> None:
        if connector == "stripe":
            self.stripe.fail_next(
                fault["method"], fault["path"], fault["status"], code=fault.get("code"), error_type=fault.get("type")
            )
        else:
            self.github.fail_next(fault["method"], fault["path"], fault["status"])


@pytest.fixture(scope="module")
def world(monkeypatch_module: pytest.MonkeyPatch) -> Iterator[World]:
    github_world = WORLDS["github"]
    github_fake = FakeGitHub(login=github_world["login"], token=github_world["token"])
    for repo in github_world["repos"]:
        github_fake.add_repo(repo["owner"], repo["name"], files=repo["files"])
    service = FakeService()
    with FakeStripe().running() as stripe_fake, github_fake.running() as running_github, service.running() as http:
        # The legacy module style (``stripe.Customer.create``) is configured on the module.
        monkeypatch_module.setattr(stripe, "api_key", WORLDS["stripe"]["apiKey"])
        monkeypatch_module.setattr(stripe, "api_base", stripe_fake.base_url)
        monkeypatch_module.setattr(stripe, "max_network_retries", 0)
        yield World(stripe_fake, running_github, http)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.mark.parametrize(("case", "form"), _forms())
def test_each_python_call_derives_what_the_shared_contract_says(
    world: World, case: dict[str, Any], form: dict[str, Any]
) -> None:
    connector = case["connector"]
    values = Values(world.base_url(connector))
    world.given(connector, case.get("given", []), values)
    prepared = world.prepare(connector, form, values)
    if case["apiName"] is None:
        assert prepared is None, f"a read was recorded as {prepared}"
        return
    assert prepared is not None, "a write was let through unrecorded"
    expected_name = values.resolve(case["apiName"])
    assert (prepared.api_name, prepared.operation_type.value) == (expected_name, case["operationType"])
    recorded = {k: prepared.payload.get(k) for k in case.get("payload", {})}
    assert recorded == values.resolve(case.get("payload", {})), "the payload lacks what the server's words read"
    if case.get("run") is False:
        return
    keys_before, bodies_before = len(world.keys_sent(connector)), len(world.bodies_sent())
    result = prepared.run(values.named["key"])
    values.named["result"] = _answer(result)
    for field, expected in case.get("answer", {}).items():
        assert values.named["result"][field] == expected, f"the fake answered {field}={values.named['result'][field]}"
    if connector != "github" and case.get("keyed", True):
        assert values.named["key"] in world.keys_sent(connector)[keys_before:], "the idempotency key never arrived"
    if "sent" in case:
        sent = values.resolve(case["sent"])
        assert any(_contains(body, sent) for body in world.bodies_sent()[bodies_before:]), "GitHub never got it"
    undo = CONNECTORS[connector].undo_for(prepared, result, None)
    got = {"type": undo.type, "params": undo.params, "requireApproval": undo.require_approval}
    expected = values.resolve({"requireApproval": False, **case["undo"]})
    assert got == expected
    CONNECTORS[connector].check_undo(undo)  # and the server takes it as it is


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(f, id=f"{f['connector']} {f['fault']['status'] or 'dropped'} {f['fault'].get('code', '')}".strip())
        for f in CONTRACT["faults"]
    ],
)
def test_each_injected_fault_is_worth_retrying_as_the_shared_contract_says(world: World, fault: dict[str, Any]) -> None:
    connector = fault["connector"]
    values = Values(world.base_url(connector))
    prepared = world.prepare(connector, CONTRACT["faultCalls"][connector]["python"], values)
    assert prepared is not None
    world.fail_next(connector, fault["fault"])
    with pytest.raises(Exception) as raised:
        prepared.run(values.named["key"])
    assert CONNECTORS[connector].is_transient(raised.value) is fault["transient"], repr(raised.value)


@pytest.mark.parametrize("name", sorted(CONTRACT["sensitiveFields"]))
def test_each_connector_redacts_the_fields_the_shared_contract_lists(name: str) -> None:
    assert sorted(CONNECTORS[name].sensitive_fields) == sorted(CONTRACT["sensitiveFields"][name])


@pytest.mark.parametrize("name", sorted(CONTRACT["undoTypes"]))
def test_each_connector_runs_the_undo_types_the_shared_contract_lists(name: str) -> None:
    assert sorted(CONNECTORS[name].undo_types) == sorted(CONTRACT["undoTypes"][name])


def _answer(result: Any) -> Any:
    """What the service answered, as JSON: a Stripe object, a PyGithub object (``create_file`` answers
    ``{"content": ContentFile, "commit": …}``) or an httpx response."""
    if isinstance(result, stripe.StripeObject):
        return result.to_dict()
    if isinstance(result, httpx.Response):
        return result.json()
    if isinstance(result, dict):
        return {k: _answer(v) for k, v in result.items()}
    return getattr(result, "raw_data", result)


def _contains(body: Any, expected: dict[str, Any]) -> bool:
    return isinstance(body, dict) and all(body.get(k) == v for k, v in expected.items())
