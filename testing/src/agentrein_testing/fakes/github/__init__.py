"""A stateful fake of the GitHub REST API on 127.0.0.1, for tests and demos that drive the real PyGithub.

It answers as GitHub does, closely enough that a connector built against it works against api.github.com:
JSON in and out with GitHub's response shapes (every ``url`` points back at the fake, so PyGithub's lazy
completion and follow-up calls land here), GitHub's errors (``{"message": "Not Found", "documentation_url":
...}``, 422 ``Validation Failed`` with ``errors``, 401 without a token or with a bad one), pagination by
``Link`` headers, and state: users and organisations, repositories, issues, issue comments, labels, pull
requests (created from branches, merged into their base), git refs and file contents over a small commit
graph. GitHub has no idempotency keys, so neither has the fake: a repeated POST creates twice.

Faults are injected as in every fake of :mod:`agentrein_testing.fakes.base`: an error status, a dropped
connection, and the "lost response" (``after_effect=True``: the request takes effect, the client never hears).

Start with :meth:`FakeGitHub.running`, then point PyGithub at ``base_url``::

    fake = FakeGitHub()  # the token "ghp_test" belongs to user "octocat"
    fake.add_repo("acme", "shop")
    with fake.running():
        gh = github.Github(auth=github.Auth.Token("ghp_test"), base_url=fake.base_url)
        gh.get_repo("acme/shop").create_issue("Broken checkout")
"""

from agentrein_testing.fakes.github.fake import FakeGitHub, GitHubFault, Recorded

__all__ = ["FakeGitHub", "GitHubFault", "Recorded"]
