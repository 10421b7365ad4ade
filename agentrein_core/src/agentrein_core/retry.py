"""Retries of transient failures: exponential backoff with full jitter, through tenacity.

Only calls the caller listed as ``retryable`` are retried, only for failures the connector judges transient,
and every attempt carries the same idempotency key, so a retried call is applied at most once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)

#: Attempts in all (the first call and its retries).
DEFAULT_ATTEMPTS = 4
#: Backoff bounds in seconds: a random wait up to min(MAX, INITIAL * 2**n) before retry n.
INITIAL_WAIT = 0.05
MAX_WAIT = 2.0


def retrying(
    is_transient: Callable[[BaseException], bool],
    attempts: int = DEFAULT_ATTEMPTS,
    *,
    initial: float = INITIAL_WAIT,
) -> Retrying:
    return Retrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=initial, max=MAX_WAIT),
        reraise=True,
    )


def retrying_until(is_transient: Callable[[BaseException], bool], deadline: float) -> Retrying:
    """Retries with the same backoff for as long as the next attempt starts before ``deadline`` (a
    :func:`time.monotonic` instant): a wait that outlives an outage of what it waits on."""
    return Retrying(
        retry=retry_if_exception(is_transient),
        stop=stop_before_delay(max(0.0, deadline - time.monotonic())),
        wait=wait_random_exponential(multiplier=INITIAL_WAIT, max=MAX_WAIT),
        reraise=True,
    )


def async_retrying(
    is_transient: Callable[[BaseException], bool],
    attempts: int = DEFAULT_ATTEMPTS,
    *,
    initial: float = INITIAL_WAIT,
) -> AsyncRetrying:
    return AsyncRetrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=initial, max=MAX_WAIT),
        reraise=True,
    )
