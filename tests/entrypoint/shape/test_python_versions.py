"""Declared platform support is exactly what is tested.

The Python versions the package declares (``pyproject.toml`` classifiers, whose lowest must be the
``requires-python`` floor) are each found on this machine (pyenv's ``~/.pyenv/versions`` or ``python3.X`` on
PATH; a declared version that is missing FAILS, it is not skipped) and the shim runs under each: a ``--dry-run``
of a rank-table plan and a real two-rank fan-out. Non-Linux hosts are refused with one line (exit 2), decided by
the pure :func:`~malaunch.entrypoint.main.host_problem`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from malaunch.entrypoint.main import host_problem
from shimutil import marked_env, write_v10_table

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = (ROOT / "pyproject.toml").read_text()


def declared_versions() -> List[str]:
    return re.findall(r'"Programming Language :: Python :: (3\.\d+)"', PYPROJECT)


def find_python(version: str) -> Optional[str]:
    """An interpreter of ``version`` (e.g. "3.10"): pyenv's versions first, then ``python3.10`` on PATH."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for candidate in sorted(root.glob(f"{version}.*/bin/python{version}"), reverse=True):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(f"python{version}")


def shim_tree(tmp: Path) -> Path:
    """A directory that makes ``malaunch.entrypoint`` importable (stdlib only) by any interpreter."""
    tree = tmp / "site"
    (tree / "malaunch").mkdir(parents=True)
    (tree / "malaunch" / "entrypoint").symlink_to(ROOT / "entrypoint")
    return tree


def run_shim(python: str, tmp: Path, args: List[str], extra: Dict[str, str]) -> subprocess.CompletedProcess[str]:
    tree = tmp / "site" if (tmp / "site").exists() else shim_tree(tmp)
    env = marked_env(extra)
    env.update({"PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"})
    return subprocess.run([python, "-m", "malaunch.entrypoint", *args], env=env, cwd=str(tmp), capture_output=True,
                          text=True, timeout=180)


def test_declared_versions_match_requires_python() -> None:
    versions = declared_versions()
    floor = re.search(r'requires-python = ">=(3\.\d+)"', PYPROJECT)
    assert versions and floor is not None
    assert min(versions, key=lambda v: int(v.split(".")[1])) == floor.group(1)
    assert f'python_version = "{floor.group(1)}"' in PYPROJECT  # mypy checks at the floor
    assert '"Operating System :: POSIX :: Linux"' in PYPROJECT


@pytest.mark.parametrize("version", declared_versions())
def test_the_shim_runs_under_every_declared_python(tmp_path: Path, version: str) -> None:
    python = find_python(version)
    assert python is not None, f"Python {version} is declared in pyproject.toml but not installed here"
    (tmp_path / "train.py").write_text(
        "import os, sys\nprint('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'], sys.version_info[:2])\n"
    )
    write_v10_table(tmp_path / "hccl.json", 1, 2)
    env = {"MA_RUN_METHOD": "ranktable", "RANK_TABLE_FILE": str(tmp_path / "hccl.json"), "MA_NUM_GPUS": "2"}
    dry = run_shim(python, tmp_path, ["--dry-run", "train.py"], env)
    assert dry.returncode == 0, dry.stderr
    assert '"method": "ranktable"' in dry.stdout and f"python{version}" in dry.stdout
    real = run_shim(python, tmp_path, ["train.py"], env)
    assert real.returncode == 0, real.stderr
    minor = f"(3, {version.split('.')[1]})"
    for rank in (0, 1):
        assert f"rank {rank} of 2 {minor}" in real.stdout, real.stdout


@pytest.mark.parametrize("platform", ["linux", "linux2"])
def test_linux_is_supported(platform: str) -> None:
    assert host_problem(platform) is None


@pytest.mark.parametrize("platform", ["darwin", "win32", "cygwin", "freebsd14", "aix"])
def test_other_hosts_are_refused_with_a_reason(platform: str) -> None:
    problem = host_problem(platform)
    assert problem is not None and "Linux only" in problem and repr(platform) in problem


@pytest.mark.parametrize("platform", ["darwin", "freebsd14"])
def test_the_shim_refuses_a_non_linux_host_with_one_line(tmp_path: Path, platform: str) -> None:
    # The shim's modules import as on Linux (a POSIX host has what they import: fcntl, resource); main() then
    # refuses the host. A host without them (Windows) fails at the import, before main() can say why.
    code = (f"import sys\nfrom malaunch.entrypoint.main import main\nsys.platform = {platform!r}\n"
            "raise SystemExit(main(['train.py'], {}))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "runs on Linux only" in lines[0] and platform in lines[0]


#: Damaged tables whose errors come from the JSON decoder's own paths (the shim decodes with the C scanner, whose
#: error raising differs between Python versions): each must be one line and exit 2 under every declared Python.
_DAMAGED = (
    ('{"status": "initializing",, "x": 1}', "Expecting property name enclosed in double quotes"),
    ('{"status": "completed", "server_list": ["unterminated', "Unterminated string starting at: line 1 column 41"),
    ("", "the file is empty"),
    ('{"status": "completed"} trailing', "(Extra data); the error is before the end"),
)


@pytest.mark.parametrize("version", declared_versions())
def test_a_damaged_table_is_one_line_under_every_declared_python(tmp_path: Path, version: str) -> None:
    python = find_python(version)
    assert python is not None, f"Python {version} is declared in pyproject.toml but not installed here"
    (tmp_path / "train.py").write_text("print('should not run')\n")
    for index, (text, fragment) in enumerate(_DAMAGED):
        table = tmp_path / f"hccl-{index}.json"
        table.write_text(text)
        env = {"MA_RUN_METHOD": "ranktable", "RANK_TABLE_FILE": str(table), "MA_NUM_GPUS": "2"}
        done = run_shim(python, tmp_path, ["--dry-run", "train.py"], env)
        lines = done.stderr.splitlines()
        assert done.returncode == 2, (text, done.stderr[-2000:])
        assert len(lines) == 1 and lines[0].startswith("ma-entrypoint: error: "), (text, done.stderr[-2000:])
        assert fragment in lines[0], lines[0]
