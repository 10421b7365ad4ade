"""A committed transaction tells the store's observers what it changed, and only a committed one: the
server's rollback workers, the long-polls and the embedded intent checks wake on these announcements."""

from __future__ import annotations

import pytest

from agentrein_core.errors import ValidationError
from agentrein_core.store import Change, Store


@pytest.fixture
def store(database_url: str) -> Store:
    return Store(database_url)


def observed(store: Store) -> list[frozenset[Change]]:
    told: list[frozenset[Change]] = []
    store.observe(told.append)
    return told


def test_a_committed_transaction_tells_the_observers_what_it_announced(store: Store) -> None:
    told = observed(store)
    with store.transaction() as tx:
        tx.announce(Change.ROLLBACK)
        tx.announce(Change.ROLLBACK)
        assert told == []  # not before the commit
    assert told == [frozenset({Change.ROLLBACK})]
    store.close()


def test_a_transaction_that_rolls_back_tells_nothing(store: Store) -> None:
    told = observed(store)
    with pytest.raises(ValidationError), store.transaction() as tx:
        tx.announce(Change.DECISION)
        raise ValidationError("field", "refused")
    assert told == []
    store.close()


def test_what_a_failed_savepoint_announced_is_undone_with_it(store: Store) -> None:
    told = observed(store)
    with store.transaction() as tx:
        with pytest.raises(ValidationError), tx.savepoint():
            tx.announce(Change.ROLLBACK)
            raise ValidationError("field", "refused")
        tx.announce(Change.DECISION)
    assert told == [frozenset({Change.DECISION})]
    store.close()
