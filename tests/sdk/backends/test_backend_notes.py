"""A backend says its notes through the sink it is given, never on stderr by itself (issue 27): a Volcano job that
is created, or deleted, but cannot be recorded in (or forgotten by) the job index (its home is no folder) is noted
through ``progress``, in the one form of a note (``Backend.note``: ``ma-submit: note: ...``)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from malaunch.sdk import spec_from_mapping
from malaunch.sdk.backends.volcano.backend import VolcanoBackend

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
    assert notes.getvalue().startswith(f"ma-submit: note: job {handle.id} was created")
    assert capfd.readouterr().err == ""
    handle.wait(timeout=60)
    assert backend.delete(handle.id) == handle.id
    assert f"ma-submit: note: job {handle.id} was deleted but is still in " in notes.getvalue(), notes.getvalue()
    assert capfd.readouterr().err == ""  # on the old code the deletion's note went to stderr
    quiet = VolcanoBackend(kubeconfig=str(kubeconfig), environ={"MALAUNCH_HOME": str(blocked)}, progress=None)
    quiet.submit(spec)
    assert capfd.readouterr().err == ""
