"""``.malaunchignore`` matching: explicit gitignore cases, and pathspec's GitIgnoreSpec as the referee.

Where pathspec and our matcher disagree, git itself decides (``git check-ignore`` in a scratch repository holding
the file): pathspec is a fast referee, git is the definition (e.g. ``b/**/`` leaves the file ``b/a`` alone in git,
while pathspec matches it)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import List

import pathspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from malaunch.sdk.backends.codefiles import select_code_files
from malaunch.sdk.backends.ignorefile import IgnoreRules


def excluded(rules: IgnoreRules, path: str) -> bool:
    """A file is left out when it or any folder above it is ignored (folders are never entered then)."""
    parts = path.split("/")
    for depth in range(1, len(parts)):
        if rules.ignored("/".join(parts[:depth]), is_dir=True):
            return True
    return rules.ignored(path)


@pytest.mark.parametrize(
    ("patterns", "path", "expected"),
    [
        (["*.log"], "a/b/run.log", True),
        (["/*.log"], "a/run.log", False),
        (["/*.log"], "run.log", True),
        (["data/"], "data/x.bin", True),
        (["data/"], "data", False),  # a file named data: folders only
        (["data"], "src/data/x", True),
        (["src/data"], "other/src/data/x", False),
        (["**/cache"], "a/b/cache/f", True),
        (["logs/**"], "logs/a/b", True),
        (["a/**/z"], "a/z", True),
        (["a/**/z"], "a/b/c/z", True),
        (["*.txt", "!keep.txt"], "keep.txt", False),
        (["*.txt", "!keep.txt"], "drop.txt", True),
        (["big/", "!big/keep.py"], "big/keep.py", True),  # as in git: the folder is not entered
        (["# comment", "", "x"], "x", True),
        (["\\#hash"], "#hash", True),
        (["file\\ "], "file ", True),
        (["file "], "file", True),
        (["[ab].py"], "a.py", True),
        (["[!ab].py"], "a.py", False),
        (["[!ab].py"], "c.py", True),
        (["?.py"], "ab.py", False),
        (["b/**/"], "b/a", False),  # git check-ignore agrees; pathspec's GitIgnoreSpec says True
        (["b/**/"], "b/sub/f", True),
    ],
)
def test_gitignore_cases(patterns: List[str], path: str, expected: bool) -> None:
    assert excluded(IgnoreRules(patterns), path) is expected


_SEGMENT = st.sampled_from(["a", "b", "ab", "x.py", "y.log", "data", "c1"])
_PATTERN_PART = st.sampled_from(["a", "b", "*", "?", "*.py", "*.log", "**", "data", "x.py", "[ab]", "c?"])


@st.composite
def _pattern(draw: st.DrawFn) -> str:
    parts = draw(st.lists(_PATTERN_PART, min_size=1, max_size=3))
    text = "/".join(parts)
    if draw(st.booleans()):
        text = "/" + text
    if draw(st.booleans()):
        text += "/"
    return text


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.lists(_pattern(), min_size=1, max_size=4), st.lists(_SEGMENT, min_size=1, max_size=4))
def test_agrees_with_pathspec(patterns: List[str], segments: List[str]) -> None:
    path = "/".join(segments)
    ours = excluded(IgnoreRules(patterns), path)
    if ours != pathspec.GitIgnoreSpec.from_lines(patterns).match_file(path):
        assert ours == _git_ignores(patterns, path), (patterns, path)


def _git_ignores(patterns: List[str], path: str) -> bool:
    """What git says: ``path`` (a file, its folders above it) ignored by a ``.gitignore`` of ``patterns``."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        (root / ".gitignore").write_text("".join(f"{line}\n" for line in patterns))
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("x")
        done = subprocess.run(["git", "-C", str(root), "check-ignore", "-q", path], check=False)
        assert done.returncode in (0, 1), done
        return done.returncode == 0


def test_select_code_files_uses_the_ignore_file(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.bin").write_bytes(b"x" * 10)
    (tmp_path / "notes.log").write_text("x")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "t.pyc").write_bytes(b"x")
    (tmp_path / ".malaunchignore").write_text("data/\n*.log\n")
    names = [item.relpath for item in select_code_files(str(tmp_path), hashes=False)]
    assert names == [".malaunchignore", "train.py"]
