"""What redaction costs per recorded value: each shape of what the engine redacts before it stores it.

What it measures
    One :class:`~agentrein_core.redaction.Redactor` with the http connector's fields (as the engine keeps one
    per connector), warmed up, then each case below redacted ``--calls`` times in ``--rounds`` rounds; each
    call is timed alone with ``time.perf_counter_ns``, and the table gives the median (p50) and p90 in
    microseconds, and the lowest of the rounds' medians (on a busy machine, the figure least inflated by
    waiting for a CPU). Figures are printed, never asserted.

    - an http payload as the connector describes a POST (method, URL, query, headers, a small JSON body);
    - a Stripe-like payload (customer with metadata and a nested card);
    - a response (a list object of 20 small records);
    - an api name (``POST /v1/customers/cus_123/sources``) and an undo URL;
    - an error text of about 200 characters that holds a URL;
    - a session intent or a reviewer's reason (a sentence);
    - a 10 KB plain-text body (the worst common case: every rule scans all of it);
    - a log line of the server's http client (``HTTP Request: DELETE https://… "HTTP/1.1 200 OK"``) through the
      logging filter, where the module has one.

Run ``uv run python bench/redaction.py`` (``--help`` for options). To compare with another version,
``git show <commit>:agentrein_core/src/agentrein_core/redaction.py > /tmp/old.py`` and pass
``--module /tmp/old.py``: that file's ``Redactor`` is measured instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import platform
import statistics
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from agentrein_core import redaction
from agentrein_http import HttpConnector

HTTP_PAYLOAD = {
    "method": "POST",
    "url": "https://api.example.com/v1/orders",
    "query": {"expand": "items", "access_token": "tok-123"},
    "headers": {"Content-Type": "application/json", "Authorization": "Bearer abc", "Idempotency-Key": "k-1"},
    "body": {"sku": "A1", "quantity": 2, "note": "deliver before noon", "customer": "cus_123"},
}
STRIPE_PAYLOAD = {
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "metadata": {"order": "o-123", "source": "agent"},
    "card": {"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "314"},
}
RESPONSE = {"object": "list", "data": [{"id": f"cus_{i}", "name": f"Customer {i}", "balance": i} for i in range(20)]}
API_NAME = "POST /v1/customers/cus_123/sources"
UNDO_URL = "https://api.example.com/v1/customers/cus_123/sources/src_456"
ERROR = (
    "HTTPStatusError: Client error '404 Not Found' for url 'https://api.example.com/v1/customers/cus_123/sources'"
    "; For more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/404"
)
INTENT = "Refund the duplicate charge of order 1042 for Ada Lovelace and email her a receipt"
LONG_TEXT = ("The quick brown fox jumps over the lazy dog near /v1/orders/1042 at 10:20. " * 140)[:10_240]
LOG_LINE = 'HTTP Request: DELETE https://api.example.com/v1/customers/cus_123 "HTTP/1.1 200 OK"'


def cases(module: ModuleType, redactor: Any) -> list[tuple[str, Callable[[], Any]]]:
    found: list[tuple[str, Callable[[], Any]]] = [
        ("http payload (POST)", lambda: redactor.redact(HTTP_PAYLOAD)),
        ("stripe payload (customer + card)", lambda: redactor.redact(STRIPE_PAYLOAD)),
        ("response (list of 20)", lambda: redactor.redact(RESPONSE)),
        ("api name", lambda: redactor.redact_text(API_NAME)),
        ("undo URL", lambda: redactor.redact_text(UNDO_URL)),
        ("error text (~200 chars)", lambda: redactor.redact_text(ERROR)),
        ("intent / reason (a sentence)", lambda: redactor.redact_text(INTENT)),
        ("plain-text body (10 KB)", lambda: redactor.redact_text(LONG_TEXT)),
    ]
    make_filter = getattr(module, "RedactingFilter", None)
    if make_filter is not None:
        log_filter = make_filter(redactor)

        def filtered() -> Any:
            record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "%s", (LOG_LINE,), None)
            return log_filter.filter(record)

        found.append(("httpx log record (filter)", filtered))
    return found


def measure(call: Callable[[], Any], rounds: int, calls: int) -> list[list[int]]:
    """Each round's per-call durations (ns), after as many warm-up calls (caches of keys and patterns)."""
    clock = time.perf_counter_ns
    for _ in range(calls):
        call()
    rounds_ns: list[list[int]] = []
    for _ in range(rounds):
        durations: list[int] = []
        for _ in range(calls):
            start = clock()
            call()
            durations.append(clock() - start)
        rounds_ns.append(durations)
    return rounds_ns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--module", help="a redaction.py to measure instead of the installed one")
    args = parser.parse_args()
    module = _load(args.module) if args.module else redaction
    redactor = module.Redactor(HttpConnector.sensitive_fields)
    print(f"redaction cost per call ({module.__file__}); Python {platform.python_version()} on {platform.machine()}")
    print(f"{args.rounds} rounds of {args.calls} calls per case, after {args.calls} warm-up calls\n")
    head = f"{'case':<36} {'p50 us':>8} {'p90 us':>8} {'best round p50':>15}"
    print(head)
    print("-" * len(head))
    for label, call in cases(module, redactor):
        rounds_ns = measure(call, args.rounds, args.calls)
        durations = sorted(d for one in rounds_ns for d in one)
        p50 = statistics.median(durations) / 1000
        p90 = durations[int(len(durations) * 0.9)] / 1000
        best = min(statistics.median(one) for one in rounds_ns) / 1000
        print(f"{label:<36} {p50:8.1f} {p90:8.1f} {best:15.1f}")


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("redaction_measured", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    main()
