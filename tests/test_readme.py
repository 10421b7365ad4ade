"""The README's quick start runs as written (against the loopback fake service instead of api.example.com)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from agentrein import ActionStatus, AgentRein, SessionStatus
from agentrein_testing import FakeService

README = Path(__file__).parent.parent / "README.md"


def test_the_quick_start_runs_and_a_rejection_rolls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service: FakeService, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # AgentRein() writes ./agentrein.db
    monkeypatch.delenv("AGENTREIN_DATABASE_URL", raising=False)
    match = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert match is not None
    code = match.group(1).replace("https://api.example.com", service.base_url)
    code = code.replace('requires_approval=["DELETE *"],', 'requires_approval=["DELETE *"], poll_interval_ms=20,')

    def reviewer() -> None:
        ar = AgentRein()
        while not (pending := ar.list_approvals(status="PENDING")):
            threading.Event().wait(0.02)
        ar.reject(pending[0].approval_id, reviewer="lead@example.com", reason="not this customer")
        ar.close()

    thread = threading.Thread(target=reviewer)
    thread.start()
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)
    thread.join()
    assert "rejected: not this customer" in capsys.readouterr().out
    ar = namespace["ar"]
    assert isinstance(ar, AgentRein)
    session = ar.list_sessions()[0]
    assert [a.status for a in session.actions] == [ActionStatus.ROLLED_BACK, ActionStatus.FAILED]
    assert session.status is SessionStatus.ROLLED_BACK
    assert (tmp_path / "agentrein.db").exists()
