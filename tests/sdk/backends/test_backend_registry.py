"""The registry is read when asked: a line added to ``BACKEND_MODULES`` (a test's backend, for the test's duration)
is a backend for the names, the spec and the facts at once, and what the registry keeps follows its contents."""

from __future__ import annotations

import pytest
from malaunch.sdk import JobSpec
from malaunch.sdk.backends import registry
from malaunch.sdk.errors import SpecError

BASE = {"name": "a", "code_dir": "/tmp", "boot_file": "b.py"}


def test_a_line_added_to_the_registry_is_a_backend_name_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SpecError):
        JobSpec(**BASE, backend="extra")
    monkeypatch.setitem(registry.BACKEND_MODULES, "extra", "malaunch.sdk.backends.local")
    assert "extra" in registry.BACKEND_NAMES and registry.BACKEND_NAMES[-1] == "extra"
    assert tuple(registry.BACKEND_NAMES) == tuple(registry.BACKEND_MODULES)
    assert len(registry.BACKEND_NAMES) == len(registry.BACKEND_MODULES)
    assert JobSpec(**BASE, backend="extra").backend == "extra"
    assert registry.runs_here("extra")  # its facts are the module's it names
    monkeypatch.undo()
    assert "extra" not in registry.BACKEND_NAMES


def test_the_sections_every_spec_holds_come_first_then_the_registrys_order() -> None:
    sections = registry.option_sections()
    assert [section.name for section in sections] == ["volcano", "modelarts"]
    assert [section.optional for section in sections] == [False, True]
    assert registry.section_types() == {section.name: section.options for section in sections}
