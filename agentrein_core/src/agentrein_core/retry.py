"""Retries of transient failures: exponential backoff with full jitter, through tenacity.

Only calls the caller listed as ``retryable`` are retried, only for failures the connector judges transient,
and every attempt carries the same idempotency key, so a retried call is applied at most once.
"""

from __future__ import annotations

from collections.abc import Callable

from tenacity import AsyncRetrying, Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

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
