"""A backend says its notes through the sink it is given, never on stderr by itself (issue 27): a Volcano job that
is created but cannot be recorded in the job index (its home is no folder) is noted through ``progress``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from malaunch.sdk import spec_from_mapping
from malaunch.sdk.backends.volcano import VolcanoBackend

pytestmark = pytest.mark.process


def test_a_volcano_note_goes_to_the_sink_given(
    kubeconfig: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    blocked = tmp_path / "home-is-a-file"
    blocked.write_text("")
    notes = io.StringIO()
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={"MALAUNCH_HOME": str(blocked)}, progress=notes)
    (tmp_path / "train.py").write_text("print('hi')\n")
    spec = spec_from_mapping(
        {"name": "vc-note", "code_dir": str(tmp_path), "boot_file": "train.py", "image": "reg.example/m:1",
         "backend": "volcano", "env": {"MALAUNCH_TEST_SCENARIO": "succeed"}}
    )  # fmt: skip
    handle = backend.submit(spec)
    assert handle.id.startswith("ml/vc-note-")
    assert "was created but not recorded in" in notes.getvalue() and "give --backend volcano" in notes.getvalue()
    assert capfd.readouterr().err == ""
    quiet = VolcanoBackend(kubeconfig=str(kubeconfig), environ={"MALAUNCH_HOME": str(blocked)}, progress=None)
    quiet.submit(spec)
    assert capfd.readouterr().err == ""
