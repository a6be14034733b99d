"""What ``ma-submit`` imports to answer a verb (issue 28): ``--help``, ``list``, ``status``, ``logs`` and ``stop`` of a
local job load no YAML parser, no sweeps, no job API and no cloud client; the forms the quick path recognises load
no click either. A test of what is imported, not of time: ``bench/run.py --only verbs`` measures the time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from sdkutil import REPO, job_ids, ma_submit, write_job

#: Modules the everyday verbs must not load: a backend's client libraries, the YAML parser, sweeps, the job API and
#: plan, the shim's modules that only a running job uses (its restart file, report writer, subreaper), and the
#: profile file's parser when there is no profile file.
HEAVY = (
    "yaml", "requests", "boto3", "botocore", "kubernetes", "tenacity", "urllib3",
    "malaunch.sdk.sweep.api", "malaunch.sdk.sweep.run", "malaunch.sdk.sweep.state", "malaunch.sdk.job",
    "malaunch.sdk.spec.loader", "malaunch.sdk.plan", "malaunch.entrypoint.run.attempt_status",
    "malaunch.entrypoint.run.procs.selfproc", "malaunch.entrypoint.report.report", "configparser",
)  # fmt: skip
#: What reading a local job uses and ``--help`` does not: the shim's process readers and failure classes (through
#: the lazy seam ``entrypoint/public.py``) and the job index.
NOT_FOR_HELP = (
    "malaunch.entrypoint.run.procs.proctree", "malaunch.entrypoint.report.failure_class",
    "malaunch.sdk.backends.job_index",
)  # fmt: skip

#: What the quick forms of the verbs of a local job do not load at all (issue 28): click (they are parsed by
#: ``sdk/cli/quick.py``). typing, dataclasses and inspect they do load since issue 41: avoiding them saved less than
#: the 10 ms a start-up trick must save to stay (the statuses are frozen dataclasses, issue 43).
NOT_FOR_QUICK_VERBS = ("click",)

#: What the group's own help (``--help``, ``-h``, no arguments) does not load: any verb's module (each is imported when
#: that verb runs or its help is asked), the job states, the backends, the shim, shlex (one error quotes with it), and
#: shutil (click's formatter asks it for the terminal's width; the group finds the width itself).
NOT_FOR_GROUP_HELP = (
    "malaunch.sdk.cli.submit", "malaunch.sdk.cli.jobs", "malaunch.sdk.cli.inside", "malaunch.sdk.cli.sweep",
    "malaunch.sdk.cli.configure", "malaunch.sdk.cli.profile_option", "malaunch.sdk.status", "malaunch.sdk.backends",
    "malaunch.entrypoint", "shutil", "shlex",
)  # fmt: skip

# Runs the console script's entry point as ``ma-submit ARGS`` does, then writes which HEAVY modules it loaded.
_PROBE = """
import json, sys
out, args, heavy = sys.argv[1], sys.argv[2:], {heavy!r}
from malaunch.sdk.cli import main
try:
    main(args)
except SystemExit as end:
    code = end.code
with open(out, "w") as handle:
    json.dump({{"code": code, "loaded": [name for name in heavy if name in sys.modules]}}, handle)
"""


def _loaded(
    args: List[str], env: Dict[str, str], tmp_path: Path, names: Tuple[str, ...] = HEAVY
) -> Dict[str, object]:
    out = tmp_path / "probe.json"
    code = _PROBE.format(heavy=names)
    done = subprocess.run(
        [sys.executable, "-c", code, str(out), *args], env=env, capture_output=True, text=True, timeout=120,
        cwd=str(REPO),
    )  # fmt: skip
    assert out.exists(), done.stderr
    result: Dict[str, object] = json.loads(out.read_text())
    return result


def test_help_and_an_empty_list_load_nothing_heavy(cli_env: Dict[str, str], tmp_path: Path) -> None:
    for args in (["--help"], ["list"], ["sweep", "--help"]):
        assert _loaded(args, cli_env, tmp_path) == {"code": 0, "loaded": []}, args


def test_help_loads_no_process_reader_nor_the_job_index(cli_env: Dict[str, str], tmp_path: Path) -> None:
    for args in (["--help"], ["sweep", "--help"]):
        assert _loaded(args, cli_env, tmp_path, NOT_FOR_HELP) == {"code": 0, "loaded": []}, args


def test_the_groups_help_loads_no_verb_nor_backend_nor_the_shim(cli_env: Dict[str, str], tmp_path: Path) -> None:
    for args in (["--help"], ["-h"], []):
        code = 2 if not args else 0  # no arguments: the help, and the usage error's exit code
        assert _loaded(args, cli_env, tmp_path, NOT_FOR_GROUP_HELP) == {"code": code, "loaded": []}, args


def test_a_verbs_help_loads_its_own_module(cli_env: Dict[str, str], tmp_path: Path) -> None:
    others = {f"malaunch.sdk.cli.{name}" for name in ("submit", "inside", "sweep", "configure")}
    for args, verb in ((["status", "--help"], "jobs"), (["submit", "--help"], "submit")):
        module = f"malaunch.sdk.cli.{verb}"
        loaded = _loaded(args, cli_env, tmp_path, NOT_FOR_GROUP_HELP)["loaded"]
        assert isinstance(loaded, list) and module in loaded and "malaunch.sdk.backends" in loaded, args
        assert not others.intersection(loaded) - {module}, args


def test_the_probe_sees_what_help_does_not_load(cli_env: Dict[str, str], tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", "print('hello')\n", name="dry")
    result = _loaded(["--dry-run", str(job)], cli_env, tmp_path, NOT_FOR_HELP)
    assert result["code"] == 0 and "malaunch.entrypoint.run.procs.proctree" in result["loaded"]


@pytest.mark.process
def test_the_verbs_of_a_local_job_load_nothing_heavy(cli_env: Dict[str, str], home: Path, tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", "print('hello')\n", name="lean")
    done = ma_submit([str(job)], cli_env)
    assert done.returncode == 0, done.stderr
    (job_id,) = job_ids(home)
    for args in (["list"], ["status", job_id], ["logs", job_id], ["stop", job_id], ["status", job_id[:10]]):
        assert _loaded(args, cli_env, tmp_path) == {"code": 0, "loaded": []}, args


def test_the_probe_sees_what_a_verb_loads(cli_env: Dict[str, str], tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", "print('hello')\n", name="dry")
    result = _loaded(["--dry-run", str(job)], cli_env, tmp_path)
    assert result["code"] == 0 and "yaml" in result["loaded"] and "malaunch.sdk.job" in result["loaded"]


@pytest.mark.process
def test_the_quick_forms_load_no_click(cli_env: Dict[str, str], home: Path, tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", "print('hello')\n", name="lean")
    assert ma_submit([str(job)], cli_env).returncode == 0
    (job_id,) = job_ids(home)
    names = ("click", "yaml")
    forms = [
        ["list"], ["list", "--output", "json", "--limit", "3", "--backend", "local"], ["status", job_id],
        ["status", "--output", "json", job_id[:8], "--backend", "local"], ["logs", job_id], ["logs", "-f", job_id],
        ["logs", job_id, "--tail", "1", "--follow"], ["stop", job_id], ["stop", "--backend", "local", job_id],
    ]  # fmt: skip
    for args in forms:
        assert _loaded(args, cli_env, tmp_path, names) == {"code": 0, "loaded": []}, args
    for args in (["status", "nosuch-1"], ["list", "--profile", "nosuch"]):  # errors end the quick way too
        assert _loaded(args, cli_env, tmp_path, names)["loaded"] == [], args
    declined = _loaded(["status", "--output=json", job_id], cli_env, tmp_path, names)  # click's to answer
    assert declined == {"code": 0, "loaded": ["click"]}


def test_the_groups_help_loads_no_click_where_its_text_is_stored(cli_env: Dict[str, str], tmp_path: Path) -> None:
    without = {key: value for key, value in cli_env.items() if key != "COLUMNS"}
    for env in (without, {**without, "COLUMNS": "80"}, {**without, "COLUMNS": "200"}):
        for args in (["--help"], ["-h"]):
            assert _loaded(args, env, tmp_path, ("click",)) == {"code": 0, "loaded": []}, (args, env.get("COLUMNS"))
    completing = {**without, "_MA_SUBMIT_COMPLETE": "bash_complete", "COMP_WORDS": "ma-submit --he", "COMP_CWORD": "1"}
    # A narrow terminal, more on the line, or the shell completing a word: click's to answer.
    for args, env in ((["--help"], {**without, "COLUMNS": "60"}), (["-h"], {**without, "COLUMNS": "60"}),
                      (["--help", "list"], without), (["--help"], completing)):  # fmt: skip
        assert _loaded(args, env, tmp_path, ("click",)) == {"code": 0, "loaded": ["click"]}, args


@pytest.mark.process
def test_the_quick_verbs_do_not_load_click(
    cli_env: Dict[str, str], home: Path, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", "print('hello')\n", name="lean")
    assert ma_submit([str(job)], cli_env).returncode == 0
    (job_id,) = job_ids(home)
    forms = [
        ["status", job_id], ["status", "--output", "json", job_id[:10]], ["list"], ["list", "--output", "json"],
        ["logs", job_id], ["logs", "--tail", "1", "-f", job_id], ["stop", job_id],
    ]  # fmt: skip
    for args in forms:
        assert _loaded(args, cli_env, tmp_path, NOT_FOR_QUICK_VERBS) == {"code": 0, "loaded": []}, args
    other = _loaded(["status", "--output=json", job_id], cli_env, tmp_path, NOT_FOR_QUICK_VERBS)  # click's path
    assert other["code"] == 0 and "click" in other["loaded"]  # the probe sees them where they are loaded


@pytest.mark.process
def test_the_verbs_with_a_profile_in_use_load_nothing_heavy(
    cli_env: Dict[str, str], home: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config" / "malaunch" / "profiles.ini"
    config.parent.mkdir(parents=True)
    config.write_text("[default]\nbackend = local\nimage = train:1\n\n[dev]\nkeep_for = 7d\n")
    config.chmod(0o600)
    env = {**cli_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    job = write_job(tmp_path / "job", "print('hello')\n", name="lean")
    assert ma_submit([str(job)], env).returncode == 0
    (job_id,) = job_ids(home)
    # Checking the profile's keys needs no job file: no YAML, no spec, no sweeps (only the file's parser), and the
    # verbs stay the quick ones: no click either.
    names = tuple(name for name in HEAVY if name != "configparser") + NOT_FOR_QUICK_VERBS
    for args in (["list"], ["list", "--profile", "dev"], ["status", "--profile", "dev", job_id], ["stop", job_id]):
        assert _loaded(args, env, tmp_path, names) == {"code": 0, "loaded": []}, args
    config.write_text("[default]\nbakend = local\n")  # a typo is still found, the quick way
    assert _loaded(["list"], env, tmp_path, names) == {"code": 2, "loaded": []}
