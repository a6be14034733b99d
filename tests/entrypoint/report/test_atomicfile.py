"""The one atomic write (entrypoint/report/atomicfile.py), used by the shim and the SDK alike (issue 18)."""

from __future__ import annotations

import os
import re
import stat
import threading
from pathlib import Path

import pytest
from malaunch.entrypoint.report.atomicfile import write_atomic

ROOT = Path(__file__).resolve().parents[3]


def test_writes_the_text_and_makes_the_folder(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "report.json"
    write_atomic(str(target), "héllo\n")
    assert target.read_text(encoding="utf-8") == "héllo\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]


@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_an_exact_mode_ignores_the_umask(tmp_path: Path, mode: int) -> None:
    old = os.umask(0o077)
    try:
        write_atomic(str(tmp_path / "f"), "x", mode=mode, durable=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == mode


def test_without_a_mode_the_umask_applies_as_open_would(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_atomic(str(tmp_path / "f"), "x")
        with open(tmp_path / "g", "w"):
            pass
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == stat.S_IMODE((tmp_path / "g").stat().st_mode)


def test_a_failed_rename_leaves_the_target_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "inside").write_text("kept")
    with pytest.raises(OSError):
        write_atomic(str(target), "new", prefix=".report-")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy"]
    assert (target / "inside").read_text() == "kept"


def test_readers_see_the_old_or_the_new_file_never_half(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    old, new = "a" * 200_000, "b" * 300_000
    write_atomic(str(target), old)
    seen = set()
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.add(target.read_text())

    reader = threading.Thread(target=read)
    reader.start()
    for turn in range(40):
        write_atomic(str(target), new if turn % 2 else old, durable=turn % 3 == 0)
    done.set()
    reader.join()
    assert seen <= {old, new}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


#: Renames that write nothing: module -> the lines that move something aside or mark a state (and why neither is
#: a write).
NOT_WRITES = {
    # a job's folder is renamed aside before it is removed, so no reader ever sees half a folder
    "sdk/backends/local/retention.py": ("os.rename(paths.job_dir, aside)",),
    # a waiting job's queue entry is claimed (being started) and put back by renaming it: one scheduler wins
    "sdk/backends/local/queue/store.py": ("os.replace(self.entry_name(entry), target)",
                                          "os.replace(self.entry_name(entry, _STARTING), self.entry_name(entry))"),
    # an elastic worker's log is renamed to the rank its script sees (rank-<RANK>.log)
    "entrypoint/run/output/__init__.py": ("os.rename(old, path)",),
    # retention moves a checkpoint aside (a hidden name) before removing its files, so no host reads it half removed
    "entrypoint/run/checkpoints.py": ("os.rename(path, hidden)",),
}
#: Atomic writes in code that runs where the package cannot be imported: module -> the line.
STANDALONE = {
    # the torchrun stub's text, run as `python -I -S -c` in each worker before the user's script: it notes the
    # worker's RANK (a temporary file renamed), with no site-packages to import write_atomic from
    "entrypoint/launchers/torchrun/stub.py":
        "f\"  os.replace(n.name,os.path.join(os.path.dirname(f),'{RANK_NOTE}'))\\n\"",
    # the birth record of each process msrun starts, written by msrun's ``python`` in the birth folder (a bare
    # ``python -I -S`` that imports no package) before the real interpreter replaces it
    "entrypoint/run/procs/births.py": "os.rename(temp, path)",
}


def test_it_is_the_only_atomic_write_in_the_shim_and_the_sdk() -> None:
    renames = []
    for folder in ("entrypoint", "sdk"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if line.strip() in NOT_WRITES.get(module, ()) or STANDALONE.get(module) == line.strip():
                    continue
                if re.search(r"\bos\.(replace|rename)\(|\.rename\(", line):
                    renames.append(f"{module}:{number}")
    assert [entry.split(":")[0] for entry in renames] == ["entrypoint/report/atomicfile.py"], renames
    for module, lines in [*NOT_WRITES.items(), *((module, (line,)) for module, line in STANDALONE.items())]:
        for line in lines:  # each exception still exists, exactly as listed
            assert line in [text.strip() for text in (ROOT / module).read_text().splitlines()], (module, line)
