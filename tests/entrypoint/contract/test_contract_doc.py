"""docs/entrypoint.md stays true: every variable the shim reads or the local backend sets is in its table."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _table_variables() -> set[str]:
    """Names in the first column of the inputs table (a cell may name several, e.g. MA_VJ_NAME, MA_TASK_NAME)."""
    text = (ROOT / "docs" / "entrypoint.md").read_text()
    table = text[text.index("**Inputs**") : text.index("**Outputs**")]
    names: set[str] = set()
    for line in table.splitlines():
        cells = line.split("|")
        if line.startswith("| `") and len(cells) > 2:
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[1]))
    return names


def test_every_variable_the_shim_reads_is_documented() -> None:
    source = "".join((ROOT / "entrypoint" / "contract" / name).read_text() for name in ("cluster_env.py", "config.py"))
    read = set(re.findall(r'environ, "([A-Z][A-Z0-9_]+)"', source)) | set(
        re.findall(r'_get\(environ, "(\w+)"\)', source)
    )
    read |= set(re.findall(r'environ\.get\("([A-Z][A-Z0-9_]+)"\)', source))
    read |= {"MA_TASK_INDEX", "VC_TASK_INDEX"}
    assert len(read) > 20
    assert read - _table_variables() == set()


def test_every_variable_the_local_backend_sets_is_documented() -> None:
    source = (ROOT / "sdk" / "backends" / "local" / "plan.py").read_text()
    written = set(re.findall(r'"((?:MA|VC|MS|MSRUN|MALAUNCH|RANK)_[A-Z0-9_]+)"(?::|\] =) ', source))
    written |= set(re.findall(r'\bName\.((?:MA|VC|MS|MSRUN|MALAUNCH|RANK)_[A-Z0-9_]+)(?::|\] =) ', source))
    assert "MA_NUM_HOSTS" in written
    assert written - _table_variables() == set()
