"""Fixtures the core tests share: roles granted a profile, dropped after the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.db import MakeRole, role_maker


@pytest.fixture
def make_role(dsn: str) -> Iterator[MakeRole]:
    """Create a LOGIN role with a unique name (optionally granted a profile); returns its DSN.
    Every role made is dropped after the test."""
    yield from role_maker(dsn)
