"""Fixtures of the approvals tests: a local webhook receiver."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.approvals.receiver import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver that answers 200 (a test may set its ``status`` or ``failures``)."""
    found = Receiver()
    yield found
    found.close()
