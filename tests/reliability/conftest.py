"""A private PostgreSQL with password authentication, for the cases the shared trust-auth server
cannot show (wrong password, a server that is down, a role with a password)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pgwork.tools.chaos import server


@pytest.fixture(scope="session")
def private_server() -> Iterator[server.PrivateServer]:
    with server.running() as srv:
        yield srv
