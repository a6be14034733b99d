"""``ma-submit`` used wrongly, as a new user would: each mistake is one error line that says what failed, the value
and what to do, with the documented exit code, and nothing is left behind (no job folder)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List

import pytest
from click.testing import CliRunner, Result
from malaunch.sdk.cli import cli
from sdkutil import assert_nothing_running, interrupted, ma_submit, write_job

HEAD = "name: demo\nrun_method: torchrun\ncode_dir: .\nboot_file: train.py\n"


def run(args: List[str], home: Path) -> Result:
    return CliRunner().invoke(cli, args, env={"MALAUNCH_HOME": str(home)}, catch_exceptions=False)


def one_error_line(result: Result, home: Path, code: int = 2) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ma-submit: error: "), lines[0]
    assert "Traceback" not in result.output
    assert result.exit_code == code, result.stderr
    assert not (home / "jobs").exists() or not list((home / "jobs").iterdir())
    return lines[0]


def job_file(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text("print('hi')\n")
    path = folder / "job.yaml"
    path.write_text(text)
    return path


SWEEP_HEAD = HEAD + "args: ['--lr', '{lr}']\nsweep:\n  params:\n    lr: [0.1, 0.01]\n"


@pytest.mark.parametrize(
    ("verb", "text", "wrong", "right"),
    [
        ("sweep", HEAD + "args: ['--lr', '{lr}']\nsweep:\n  parms:\n    lr: [0.1]\n", "sweep.parms", "params"),
        ("sweep", SWEEP_HEAD + "  max_paralel: 2\n", "sweep.max_paralel", "max_parallel"),
        ("sweep", SWEEP_HEAD + "  metric:\n    nme: loss\n    regex: 'loss=(\\S+)'\n", "sweep.metric.nme", "name"),
        ("submit", HEAD + "notify:\n  - url: https://example.com/hook\n    evnets: [failed]\n", "notify[0].evnets",
         "events"),
    ],
)  # fmt: skip
def test_a_misspelt_field_of_a_section_gets_a_did_you_mean(
    verb: str, text: str, wrong: str, right: str, tmp_path: Path, home: Path
) -> None:
    """As the job file's own fields do (``run_methd``: did you mean run_method?), not only the known fields' list."""
    line = one_error_line(run([verb, "--dry-run", str(job_file(tmp_path / "proj", text))], home), home)
    assert f"{wrong}: unknown field" in line
    assert line.endswith(f"; did you mean {right}?"), line


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n"])
def test_an_empty_job_file_is_called_empty(text: str, tmp_path: Path, home: Path) -> None:
    """Not "the job file must be a mapping of field: value" with no value: the file has nothing in it to fix."""
    line = one_error_line(run(["--dry-run", str(job_file(tmp_path / "proj", text))], home), home)
    assert "job.yaml: (top level): the job file is empty" in line
    assert "name:, code_dir: and boot_file:" in line


def test_a_section_that_is_no_mapping_names_itself_once(tmp_path: Path, home: Path) -> None:
    line = one_error_line(run(["--dry-run", str(job_file(tmp_path / "proj", HEAD + "resources: 3\n"))], home), home)
    assert "job.yaml: resources: must be a mapping of field: value, got 3; fix the job file" in line


@pytest.mark.parametrize("backend", ["local", "modelarts"])
def test_a_code_dir_that_is_a_file_is_called_a_file(backend: str, tmp_path: Path, home: Path) -> None:
    """The path exists: "is not an existing folder" sent the user looking for a folder that is not missing."""
    folder = tmp_path / "proj"
    text = HEAD.replace("code_dir: .", "code_dir: job.yaml") + (
        "resources: {flavor: modelarts.vm.cpu.8u}\nmodelarts: {obs_dir: 'obs://bucket/jobs/'}\nimage: img:1\n"
    )
    line = one_error_line(run(["--dry-run", "--backend", backend, str(job_file(folder, text))], home), home)
    assert "code_dir: is a file, not a folder, got '" in line
    assert line.endswith("; give the folder with your code"), line


@pytest.mark.parametrize("verb", ["status", "logs", "events", "stop", "wait", "delete"])
def test_a_job_id_with_a_typo_gets_a_did_you_mean(verb: str, home: Path) -> None:
    """A character wrong, missing or extra in a whole id names the job meant; an id like no job's gets no guess."""
    real = "train-20261129-024945-5cfa43"
    for other in (real, "train-20261128-101500-9d0e11", "eval-20261129-024950-77aa00"):
        (home / "jobs" / other).mkdir(parents=True)
    for typo in ("train-20261129-024945-5cfa4x", "train-20261129-02945-5cfa43", "train-20261129-024945-5cfa433"):
        result = run([verb, "--backend", "local", typo], home)
        assert result.exit_code == 4 and "Traceback" not in result.output
        assert result.stderr.strip() == (
            f"ma-submit: error: no job with id {typo!r} on backend 'local'; did you mean {real!r}? "
            f"or see 'ma-submit list' (MALAUNCH_HOME={home})"
        )
    unlike = run([verb, "--backend", "local", "train-20261129-031500-abcdef"], home)
    assert unlike.exit_code == 4 and "did you mean" not in unlike.stderr and "see 'ma-submit list'" in unlike.stderr


def test_a_sweep_id_with_a_typo_gets_a_did_you_mean(home: Path) -> None:
    real = "lr-sweep-20261129-024945-5cfa43"
    (home / "sweeps" / real).mkdir(parents=True)
    result = run(["sweep", "status", real[:-1] + "x"], home)
    assert result.exit_code == 4 and "Traceback" not in result.output
    assert f"; did you mean {real!r}? or see 'ma-submit sweep list'" in result.stderr


def test_a_param_given_twice_is_refused_not_half_dropped(tmp_path: Path, home: Path) -> None:
    """``--param lr=1,2 --param lr=3`` ran one trial, lr=3, without a word about 1 and 2."""
    job = job_file(tmp_path / "proj", HEAD + "args: ['--lr', '{lr}']\n")
    line = one_error_line(run(["sweep", "--dry-run", "--param", "lr=1,2", "--param", "lr=3", str(job)], home), home)
    assert line == (
        "ma-submit: error: --param lr: is given twice (--param lr=1,2 and --param lr=3); "
        "give it once, with every value: --param lr=1,2,3"
    )
    both = run(["sweep", "--dry-run", "--param", "lr=1,2,3", str(job)], home)
    assert both.exit_code == 0 and "3 trial(s)" in both.output


def _watches_files(pid: int) -> bool:
    """The process holds an inotify instance: its wait has begun (filewatch.ChangeWatch)."""
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify" for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


@pytest.mark.slow
def test_ctrl_c_of_a_wait_says_the_job_keeps_running(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    """As a Ctrl-C of submit's following says it; the wait said nothing and exited 130, which a user can read as a
    stopped job."""
    job = write_job(tmp_path / "w", "import time\nprint('up', flush=True)\ntime.sleep(600)\n", name="waited",
                    resources={"hosts": 1, "devices_per_host": 1})  # fmt: skip
    job_id = ma_submit(["--detach", str(job)], cli_env).stdout.strip()
    try:
        code, out, err = interrupted(["wait", job_id], cli_env, _watches_files)
        assert code == 130 and out == "" and "Traceback" not in err
        said = f"ma-submit: stopped waiting; job {job_id} keeps running: 'ma-submit stop {job_id}' ends it"
        assert err.strip() == said
        assert json.loads(ma_submit(["status", "--output", "json", job_id], cli_env).stdout)["state"] in (
            "PENDING", "RUNNING")  # fmt: skip
    finally:
        assert ma_submit(["stop", job_id], cli_env).returncode == 0
    assert_nothing_running(job_id)


@pytest.mark.parametrize("backend", ["local", "modelarts"])
def test_a_boot_file_the_shim_cannot_start_is_refused_before_anything_starts(
    backend: str, tmp_path: Path, home: Path
) -> None:
    """Neither .py nor .sh nor executable: the shim would exec it on every host and fail ("Permission denied", or
    torchrun's traceback) after the job was made; submit refuses it, and --dry-run says so too."""
    folder = tmp_path / "proj"
    text = HEAD.replace("boot_file: train.py", "boot_file: run.txt") + (
        "resources: {flavor: modelarts.vm.cpu.8u}\nmodelarts: {obs_dir: 'obs://bucket/jobs/'}\nimage: img:1\n"
    )
    job = job_file(folder, text)
    (folder / "run.txt").write_text("echo hi\n")
    (folder / "run.txt").chmod(0o644)
    for args in (["--dry-run"], ["--detach"]) if backend == "local" else (["--dry-run"],):
        line = one_error_line(run([*args, "--backend", backend, str(job)], home), home)
        assert "boot_file: is not executable, nor a .py or .sh file (" in line
        assert line.endswith("got 'run.txt'; make it executable (chmod +x), or give a .py or .sh file"), line
    (folder / "run.txt").chmod(0o755)
    assert run(["--dry-run", "--backend", backend, str(job)], home).exit_code == 0


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("env:\n  LR:\n", "env.LR: has no value (null); give it a value, or '' for an empty text"),
        ("args: ['--lr', null]\n", "args[1]: has no value (null); give it a value, or '' for an empty text"),
    ],
)
def test_a_value_left_empty_is_called_empty(extra: str, said: str, tmp_path: Path, home: Path) -> None:
    """``LR:`` with nothing after it said "must be a string or a number (quote it)" and showed no value."""
    line = one_error_line(run(["--dry-run", str(job_file(tmp_path / "proj", HEAD + extra))], home), home)
    assert line.endswith(f"job.yaml: {said}"), line


def test_a_required_field_left_empty_is_not_called_missing(tmp_path: Path, home: Path) -> None:
    """``name:`` with nothing after it is in the file: "add 'name:' to the job file" asked for what is there."""
    job = job_file(tmp_path / "proj", HEAD.replace("name: demo", "name:"))
    line = one_error_line(run(["--dry-run", str(job)], home), home)
    assert line.endswith("job.yaml: name: is required, and has no value here (null); write its value after 'name:'")


def test_a_long_value_keeps_its_end(tmp_path: Path, home: Path) -> None:
    """A path longer than a line's share is shown by its start and its end: the end (the folder or file named) is
    what was wrong; it was cut off ('.../aaaa...')."""
    folder = "deep/" * 16 + "no-such-code"
    line = one_error_line(
        run(["--dry-run", str(job_file(tmp_path / "proj", HEAD.replace("code_dir: .", f"code_dir: {folder}")))], home),
        home,
    )
    assert "code_dir: is not an existing folder, got '" in line
    assert line.endswith("/deep/deep/no-such-code'; give the folder with your code"), line


MA_FIELDS = "modelarts: {obs_dir: 'obs://bucket/jobs/'}\nimage: img:1\n"


@pytest.mark.parametrize(
    ("verb", "text", "said"),
    [
        (["--dry-run", "--backend", "local"], HEAD.replace("train.py", "nope.py"),
         "boot_file: no such file in code_dir ("),
        (["--dry-run", "--backend", "modelarts"], HEAD + MA_FIELDS, "resources.flavor: is required"),
        # a sweep's trial: named too, with its values (planned by --dry-run and by the sweep's start)
        (["sweep", "--dry-run"], SWEEP_HEAD.replace("train.py", "nope.py"), "boot_file: no such file in code_dir ("),
        (["sweep", "--detach"], SWEEP_HEAD.replace("train.py", "nope.py"), "boot_file: no such file in code_dir ("),
        (["sweep", "--dry-run"], SWEEP_HEAD + "backend: modelarts\n" + MA_FIELDS,
         "resources.flavor: is required for the modelarts backend in trial 0 (lr=0.1)"),
        (["sweep", "--detach"], SWEEP_HEAD + "backend: modelarts\n" + MA_FIELDS,
         "resources.flavor: is required for the modelarts backend in trial 0 (lr=0.1)"),
    ],
)  # fmt: skip
def test_a_field_found_wrong_at_planning_names_the_job_file(
    verb: List[str], text: str, said: str, tmp_path: Path, home: Path
) -> None:
    """As the loader's lines do ('job.yaml: resources.hosts: ...'): which of several job files to fix (and, in a
    sweep, which trial); nothing is recorded."""
    job = job_file(tmp_path / "proj", text)
    line = one_error_line(run([*verb, str(job)], home), home)
    assert line.startswith(f"ma-submit: error: {job}: {said}"), line
    assert "sweep" not in verb or " in trial 0 (lr=0.1)" in line, line
    assert not (home / "sweeps").exists() or not list((home / "sweeps").iterdir())


def _sleeping(pid: int) -> bool:
    """The process sleeps between two looks (time.sleep): a sweep wait's loop has begun."""
    try:
        with open(f"/proc/{pid}/wchan") as wchan:
            return wchan.read() == "hrtimer_nanosleep"
    except OSError:
        return False


@pytest.mark.slow
def test_ctrl_c_of_a_sweep_wait_says_what_keeps_running(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    """Through the real process: its Ctrl-C (SIGINT) once its wait loop runs. The line names the trials that keep
    running, those that wait and who starts them, and the command that ends them."""
    job = write_job(tmp_path / "s", "import time\nprint('up', flush=True)\ntime.sleep(600)\n", name="waited",
                    resources={"hosts": 1, "devices_per_host": 1}, args=["--lr", "{lr}"],
                    sweep={"params": {"lr": [1, 2]}, "max_parallel": 1})  # fmt: skip
    sweep_id = ma_submit(["sweep", "--detach", str(job)], cli_env).stdout.strip()
    try:
        code, out, err = interrupted(["sweep", "wait", sweep_id], cli_env, _sleeping)
        assert code == 130 and out == "" and "Traceback" not in err, err
        assert err.strip() == (
            f"ma-submit: stopped waiting; sweep {sweep_id} keeps running: trial 0 runs, trial 1 waits for a free "
            f"slot (the sweep's driver starts it, or the next 'ma-submit sweep wait {sweep_id}'); "
            f"'ma-submit sweep stop {sweep_id}' ends them"
        ), err
    finally:
        assert ma_submit(["sweep", "stop", sweep_id], cli_env).returncode == 0
    status = json.loads(ma_submit(["sweep", "status", "--output", "json", sweep_id], cli_env).stdout)
    assert [t["state"] for t in status["trials"]] == ["STOPPED", "SKIPPED"], status
