"""Print the server's OpenAPI document (what ``GET /schema/openapi.json`` answers) without a network: the app
is built over a throwaway SQLite database and asked through Litestar's in-process test client.

    uv run python sdk-ts/scripts/openapi.py > openapi.json
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from pathlib import Path

from cryptography.fernet import Fernet
from litestar.testing import TestClient

from agentrein_core.vault import Vault
from agentrein_server.app import create_app, open_services


def main() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # its request lines are not the document
    with tempfile.TemporaryDirectory() as tmp:
        services = open_services(f"sqlite:///{Path(tmp) / 'agentrein.db'}", vault=Vault(Fernet.generate_key()))
        try:
            with TestClient(create_app(services, run_workers=False)) as client:
                answer = client.get("/schema/openapi.json")
                answer.raise_for_status()
                document = answer.json()
        finally:
            services.engine.store.close()
    json.dump(document, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
