"""Record ids: a short kind prefix (so a human can tell ``act_…`` from ``ses_…``) and 128 random bits."""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"
