"""Testing with AgentRein: loopback fakes of the services agents call, the connector contract, pytest fixtures.

``pip install agentrein-testing`` and pytest finds the fixtures (``agentrein``, ``fake_stripe``, ``fake_github``,
``fake_http_service``: see :mod:`agentrein_testing.plugin`); the rest is imported from here.
"""

from agentrein_testing.contract import ConnectorContract, Sample
from agentrein_testing.fakes.github import FakeGitHub
from agentrein_testing.fakes.service import FakeService
from agentrein_testing.fakes.stripe import FakeStripe

__all__ = ["ConnectorContract", "FakeGitHub", "FakeService", "FakeStripe", "Sample"]
