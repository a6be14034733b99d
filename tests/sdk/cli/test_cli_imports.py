"""What ``ma-submit`` imports to answer a verb: the verbs of a local job (``--help``, ``list``, ``status``, ``logs``,
``stop``) load no backend's client library (kubernetes, boto3, the HTTP stack the cloud backends use), and the
group's help loads no verb's module (the group is a lazy group, :mod:`malaunch.sdk.cli.verbs`); ``submit --help``
loads no job API (its work is named apart), and a local job's verbs load no cloud backend's job-file section. A
test of what is imported, not of time: ``bench/run.py --only verbs`` measures the time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from sdkutil import REPO, job_ids, ma_submit, write_job

#: What only a cloud backend (or a notification's delivery) needs: its client libraries, loaded when that backend is
#: opened, never by a local job's verbs.
HEAVY = ("requests", "boto3", "botocore", "kubernetes", "tenacity", "urllib3")

#: What the group's own help (``--help``, ``-h``, no arguments) does not load: any verb's module (each is imported when
#: that verb runs or its help is asked).
NOT_FOR_GROUP_HELP = (
    "malaunch.sdk.cli.submit", "malaunch.sdk.cli.jobs", "malaunch.sdk.cli.inside", "malaunch.sdk.cli.sweep",
    "malaunch.sdk.cli.configure", "malaunch.sdk.cli.profile_option",
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


def test_the_groups_help_loads_no_verb(cli_env: Dict[str, str], tmp_path: Path) -> None:
    for args in (["--help"], ["-h"], []):
        code = 2 if not args else 0  # no arguments: the help, and the usage error's exit code
        assert _loaded(args, cli_env, tmp_path, NOT_FOR_GROUP_HELP) == {"code": code, "loaded": []}, args


def test_a_verbs_help_loads_its_own_module(cli_env: Dict[str, str], tmp_path: Path) -> None:
    others = {f"malaunch.sdk.cli.{name}" for name in ("submit", "inside", "sweep", "configure")}
    for args, verb in ((["status", "--help"], "jobs"), (["submit", "--help"], "submit")):
        module = f"malaunch.sdk.cli.{verb}"
        loaded = _loaded(args, cli_env, tmp_path, NOT_FOR_GROUP_HELP)["loaded"]
        assert isinstance(loaded, list) and module in loaded, args
        assert not others.intersection(loaded) - {module}, args


@pytest.mark.process
def test_the_verbs_of_a_local_job_load_nothing_heavy(cli_env: Dict[str, str], home: Path, tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", "print('hello')\n", name="lean")
    done = ma_submit([str(job)], cli_env)
    assert done.returncode == 0, done.stderr
    (job_id,) = job_ids(home)
    for args in (["list"], ["status", job_id], ["logs", job_id], ["stop", job_id], ["status", job_id[:10]]):
        assert _loaded(args, cli_env, tmp_path) == {"code": 0, "loaded": []}, args


#: What a verb's own help does not load when its work is named apart from its definition (``submit``: the job API).
NOT_FOR_SUBMIT_HELP = (
    "yaml", "malaunch.sdk.cli.submitting", "malaunch.sdk.job", "malaunch.sdk.spec.model", "malaunch.sdk.spec.loader",
    "malaunch.sdk.follow", "malaunch.sdk.opening",
)  # fmt: skip
#: What a local job's verbs do not load: a cloud backend's own job-file section (its facts module).
CLOUD_SECTIONS = ("malaunch.sdk.backends.volcano.options", "malaunch.sdk.backends.modelarts.options")


def test_submits_help_loads_no_job_api(cli_env: Dict[str, str], tmp_path: Path) -> None:
    for args in (["submit", "--help"], ["submit", "-h"]):
        assert _loaded(args, cli_env, tmp_path, NOT_FOR_SUBMIT_HELP) == {"code": 0, "loaded": []}, args


@pytest.mark.process
def test_the_verbs_of_a_local_job_load_no_cloud_section(cli_env: Dict[str, str], home: Path, tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", "print('hello')\n", name="lean")
    assert ma_submit([str(job)], cli_env).returncode == 0
    (job_id,) = job_ids(home)
    for args in (["list"], ["status", job_id], ["logs", job_id], ["stop", job_id], ["--help"], ["submit", "--help"]):
        assert _loaded(args, cli_env, tmp_path, CLOUD_SECTIONS) == {"code": 0, "loaded": []}, args


def test_the_probe_sees_what_a_verb_loads(cli_env: Dict[str, str], tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", "print('hello')\n", name="dry")
    names = ("yaml", "malaunch.sdk.cli.submit", "malaunch.sdk.cli.submitting")
    result = _loaded(["--dry-run", str(job)], cli_env, tmp_path, names)
    assert result == {"code": 0, "loaded": list(names)}


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
    names = HEAVY
    for args in (["list"], ["list", "--profile", "dev"], ["status", "--profile", "dev", job_id], ["stop", job_id]):
        assert _loaded(args, env, tmp_path, names) == {"code": 0, "loaded": []}, args
    config.write_text("[default]\nbakend = local\n")  # a typo is still found
    assert _loaded(["list"], env, tmp_path, names) == {"code": 2, "loaded": []}


#: What ``events`` does not load: the records and the reader of what a job's hosts use and of a command run inside
#: one (``top``, ``exec``).
NOT_FOR_EVENTS = ("malaunch.sdk.backends.inside", "malaunch.sdk.backends.local.inside")


@pytest.mark.process
def test_events_loads_no_usage_or_exec(cli_env: Dict[str, str], home: Path, tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", "print('hello')\n", name="lean")
    assert ma_submit([str(job)], cli_env).returncode == 0
    (job_id,) = job_ids(home)
    names = (*NOT_FOR_EVENTS, "malaunch.sdk.backends.events", "malaunch.sdk.backends.local.events")
    assert _loaded(["events", job_id], cli_env, tmp_path, names) == {"code": 0, "loaded": list(names[2:])}
