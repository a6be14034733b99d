"""Fixtures of the shim's tests that start emulated hosts (:mod:`hostsutil`)."""

from __future__ import annotations

from typing import Iterator, List

import pytest
from hostsutil import Hosts


@pytest.fixture
def hosts() -> Iterator[List[Hosts]]:
    """The jobs a test makes (append each): every one is closed after the test, and proven to leave nothing."""
    made: List[Hosts] = []
    yield made
    for job in made:
        job.close()
