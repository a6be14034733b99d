"""``templates/Dockerfile`` agrees with the package: its ENTRYPOINT is the shim's console script, it copies
everything the build needs, the framework pin is the tested one, and the files it copies build a wheel that
carries the package data (the Volcano template, the job schema). Docker itself cannot run here."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import tomllib
from malaunch.sdk.backends.volcano.manifest import ENTRYPOINT
from malaunch.sdk.backends.volcano.options import VolcanoOptions

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "templates" / "Dockerfile"


def instructions() -> List[Tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: List[Tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def pyproject() -> Dict[str, object]:
    data: Dict[str, object] = tomllib.loads((REPO / "pyproject.toml").read_text())
    return data


def test_entrypoint_is_the_shim_console_script() -> None:
    (entry,) = [args for word, args in instructions() if word == "ENTRYPOINT"]
    assert json.loads(entry) == [ENTRYPOINT] == ["ma-entrypoint"]
    # the shim's command is the plain script entrypoint/ma-entrypoint (its docstring says why), not an entry point
    # (ma-submit is one too: its first lines hold Ctrl-C before the package is imported; sdk/ma-submit says why)
    assert "scripts" not in pyproject()["project"]  # type: ignore[operator]
    files = pyproject()["tool"]["setuptools"]["script-files"]  # type: ignore[index]
    assert files == ["entrypoint/ma-entrypoint", "sdk/ma-submit"]
    assert os.access(REPO / "sdk" / "ma-submit", os.X_OK)
    script = REPO / "entrypoint" / "ma-entrypoint"
    assert os.access(script, os.X_OK)
    text = script.read_text()
    assert "\nfrom malaunch.entrypoint.__main__ import console_main  " in text and text.endswith("\nconsole_main()\n")


def copies() -> Dict[str, str]:
    """Source in the repository -> where COPY puts it in the image."""
    out: Dict[str, str] = {}
    for word, args in instructions():
        if word == "COPY":
            *sources, dest = [part for part in shlex.split(args) if not part.startswith("--")]
            for source in sources:
                into_dir = len(sources) > 1 or dest.endswith("/")
                out[source] = f"{dest.rstrip('/')}/{Path(source).name}" if into_dir else dest
    return out


def install_dir() -> str:
    return str(Path(copies()["pyproject.toml"]).parent)


def test_install_steps_copy_what_the_package_build_needs() -> None:
    config = pyproject()
    package_dirs = config["tool"]["setuptools"]["package-dir"].values()  # type: ignore[index]
    readme = config["project"]["readme"]  # type: ignore[index]
    where = install_dir()
    for needed in ("pyproject.toml", str(readme), *package_dirs):
        assert copies().get(needed) == f"{where}/{needed}", f"the Dockerfile does not copy {needed} to {where}/"
    runs = [args for word, args in instructions() if word == "RUN"]
    assert any(re.search(rf"pip install {re.escape(where)}(\s|$)", run) for run in runs), "no pip install of the copy"
    for source in copies():
        assert (REPO / source).exists(), f"COPY {source}: no such file in the repository"


def test_framework_pin_is_the_tested_one_and_the_workdir_is_the_default_code_path() -> None:
    args = dict(re.match(r"(\w+)=?(.*)", a).groups() for w, a in instructions() if w == "ARG")  # type: ignore[union-attr]
    framework = args["FRAMEWORK"].strip('"')
    assert f'"{framework}"' in (REPO / "scripts" / "setup.sh").read_text()
    (workdir,) = [a for w, a in instructions() if w == "WORKDIR"]
    assert workdir == VolcanoOptions().code_path
    assert [a for w, a in instructions() if w == "USER"] == ["ma-user"]


@pytest.mark.slow
def test_the_copied_files_build_a_wheel_with_the_package_data(tmp_path: Path) -> None:
    """What ``pip install /tmp/malaunch`` does in the image, from exactly the files the Dockerfile copies."""
    import shutil

    src = tmp_path / "malaunch"
    src.mkdir()
    for source, target in copies().items():
        path, dest = REPO / source, src / Path(target).relative_to(install_dir())
        if path.is_dir():
            shutil.copytree(path, dest, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, dest)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("malaunch-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "malaunch/sdk/backends/volcano/job-template.yaml" in names
    assert "malaunch/sdk/job.schema.json" in names
    assert "malaunch/sdk/spec/core.schema.json" in names  # what the schema is made from (malaunch.sdk.spec.schema)
    assert "malaunch/entrypoint/main.py" in names
    # the shim's command: the repository's script as it is, but for the first line (the installer sets the interpreter)
    version = pyproject()["project"]["version"]  # type: ignore[index]
    # and ma-submit's, which holds Ctrl-C before the package is imported (a pip wrapper would import it first)
    for script, source in (("ma-entrypoint", REPO / "entrypoint"), ("ma-submit", REPO / "sdk")):
        installed = zipfile.ZipFile(wheel).read(f"malaunch-{version}.data/scripts/{script}").decode()
        head, _, body = installed.partition("\n")
        assert head == "#!python" and body == (source / script).read_text().partition("\n")[2]
    entry_points = [n for n in names if n.endswith("entry_points.txt")]
    assert not entry_points or "ma-" not in zipfile.ZipFile(wheel).read(entry_points[0]).decode()
