"""What a new user meets first (issue 29): error lines that point at the real culprit, options that take what
the shim takes, output that lines up, and a first job whose progress comes before its output."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest
from malaunch.sdk import Job
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.cli.jobs import render_status
from malaunch.sdk.follow import FollowEvent, follow_job
from malaunch.sdk.status import HostState, HostStatus, JobState, JobStatus
from malaunch.sdk.units import binary_size_text
from sdkutil import CLI_TIMEOUT, REPO, VENV_BIN, ma_submit, wait_for, write_job

JOB = "name: demo\ncode_dir: .\nboot_file: boot.py\n"


def _job(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    (tmp_path / "boot.py").write_text("print('hi')\n")
    path = tmp_path / name
    path.write_text(text)
    return path


def _error(result: object) -> str:
    stderr = str(result.stderr)  # type: ignore[attr-defined]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr  # one line, no traceback
    return lines[0]


def test_malformed_yaml_quotes_the_bad_line_not_the_start_of_the_file(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    path = _job(tmp_path, JOB + "args: [--epochs, 3\nenv: {OMP_NUM_THREADS: '2'}\n")
    result = ma_submit(["--dry-run", str(path)], cli_env)
    assert result.returncode == 2
    line = _error(result)
    assert "line 5, column 4" in line and "got \"env: {OMP_NUM_THREADS: '2'}\"" in line, line
    assert "name: demo" not in line  # the first 40 characters of the file are no culprit


def test_an_unterminated_quote_is_shown_where_it_began_with_a_secret_masked(
    tmp_path: Path, cli_env: Dict[str, str]
) -> None:
    path = _job(tmp_path, JOB + 'env:\n  API_TOKEN: "s3cr3t-value\n  OTHER: x\n')
    result = ma_submit(["--dry-run", str(path)], cli_env)
    assert result.returncode == 2
    line = _error(result)
    assert "line 5, column 14" in line and "while scanning a quoted scalar" in line, line
    assert "API_TOKEN: ***" in line and "s3cr3t" not in line


def test_a_binary_job_file_is_said_to_be_no_yaml_file(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(b"\x80\x02\x8a\x0alfj\x9c\xfc\x00\x00" + bytes(range(256)))
    result = ma_submit(["--dry-run", str(path)], cli_env)
    assert result.returncode == 2
    line = _error(result)
    assert "is not a text (YAML) file" in line and "check the path" not in line, line
    nul = tmp_path / "nul.yaml"
    nul.write_bytes(b"name: demo\x00\n")
    assert "is not a text (YAML) file (a NUL byte at offset 10)" in _error(ma_submit(["--dry-run", str(nul)], cli_env))


def test_a_bad_command_line_value_names_the_option_not_the_job_file(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    path = _job(tmp_path, JOB)
    line = _error(ma_submit(["--hosts", "100000", "--dry-run", str(path)], cli_env))
    assert line.startswith("ma-submit: error: --hosts: must be <= ") and "got 100000" in line, line
    assert "job file" not in line
    line = _error(ma_submit(["--name", "bad name!", "--dry-run", str(path)], cli_env))
    assert "--name:" in line and "job file" not in line, line


def test_run_method_is_taken_in_any_case_as_the_shim_takes_it(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    path = _job(tmp_path, JOB)
    result = ma_submit(["--run-method", "TORCHRUN", "--dry-run", str(path)], cli_env)
    assert result.returncode == 0, result.stderr
    assert re.search(r"run_method:\s+torchrun\n", result.stdout), result.stdout
    assert "MA_RUN_METHOD=torchrun" in result.stdout


@pytest.mark.parametrize(
    ("env_yaml", "name"),
    [("MALAUNCH_TRIAL_INDEX: '3'", "MALAUNCH_TRIAL_INDEX"), ("MALAUNCH_PARAM_LR: '0.1'", "MALAUNCH_PARAM_LR")],
)
def test_a_job_file_may_not_set_the_sweeps_variables(
    tmp_path: Path, cli_env: Dict[str, str], env_yaml: str, name: str
) -> None:
    path = _job(tmp_path, JOB + f"env: {{{env_yaml}}}\n")
    result = ma_submit(["--dry-run", str(path)], cli_env)
    assert result.returncode == 2
    line = _error(result)
    assert f"env.{name}: is set for each trial by the sweep, not by env" in line and "remove it" in line, line


def test_the_command_line_may_not_set_the_sweeps_variables(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    path = _job(tmp_path, JOB)
    result = ma_submit(["--env", "MALAUNCH_PARAM_LR=0.1", "--dry-run", str(path)], cli_env)
    assert result.returncode == 2
    assert "--env MALAUNCH_PARAM_LR: is set for each trial by the sweep" in _error(result)


def test_sizes_are_said_in_the_unit_that_fits() -> None:
    sizes = [binary_size_text(n) for n in (0, 900, 2048, 5 << 20, 3 << 30)]
    assert sizes == ["0 B", "900 B", "2.0 KiB", "5.0 MiB", "3.0 GiB"]


def test_status_host_columns_line_up_and_no_line_ends_in_blanks() -> None:
    hosts = (
        HostStatus(0, "127.0.0.1", HostState.RUNNING, pid=4242),
        HostStatus(1, "ml/very-long-pod-name-worker-1", HostState.PENDING),
        HostStatus(10, "10.0.0.7", HostState.EXITED, exit_code=0),
    )
    status = JobStatus(id="ml/job", backend="volcano", state=JobState.RUNNING, hosts=hosts, location="ml/job")
    lines = render_status(status).splitlines()
    assert all(line == line.rstrip() for line in lines), lines
    rows = [line for line in lines if line.startswith("host ")]
    assert len(rows) == 3
    address_at = {rows[0].index("127.0.0.1"), rows[1].index("ml/very"), rows[2].index("10.0.0.7")}
    state_at = {rows[0].index("RUNNING"), rows[1].index("PENDING"), rows[2].index("EXITED")}
    assert len(address_at) == 1 and len(state_at) == 1, rows
    assert lines[0].index("ml/job") == address_at.pop()  # the values of id: and host N: line up too


def test_the_first_job_says_it_runs_before_its_hosts_output(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    job = write_job(tmp_path / "job", "print('first line of output', flush=True)\n", resources={"hosts": 2})
    result = subprocess.run(  # progress (stderr) and output (stdout) in the order they were written
        [os.path.join(VENV_BIN, "ma-submit"), str(job)], env=cli_env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
    order = result.stdout.splitlines()
    first_output = next(i for i, line in enumerate(order) if line.startswith("[host "))
    said = [line for line in order[:first_output] if line.startswith("ma-submit: ")]
    assert len(said) >= 2 and "submitted job" in said[0], order  # the job's progress, not only its submission


def test_output_already_written_when_following_starts_comes_after_the_start(home: Path, cleanup_jobs: None) -> None:
    """The job runs until following has shown its line (a file the test makes then): a job that ended before the
    follower's first look would have no start to say (on a busy machine that look can come seconds late)."""
    seen = home.parent / "seen"
    job = write_job(home.parent / "job", f"""\
        import os, time
        print('first line of output', flush=True)
        deadline = time.monotonic() + 120  # only against hanging
        while not os.path.exists({str(seen)!r}) and time.monotonic() < deadline:
            time.sleep(0.05)
        """)  # fmt: skip
    handle = Job.from_yaml(str(job)).submit(LocalBackend(home=str(home)))
    console = home / "jobs" / handle.id / "hosts" / "0" / "console.log"
    wait_for(lambda: console.is_file() and "first line of output" in console.read_text(), 60, "the first line")
    events: List[FollowEvent] = []
    for event in follow_job(handle):
        events.append(event)
        if event.kind == "log":
            seen.touch()
    first_log = next(i for i, event in enumerate(events) if event.kind == "log")
    before = [event.text for event in events[:first_log]]
    assert any(re.fullmatch(r"job \S+ is RUNNING", text) for text in before), before
    assert any(re.match(r"host 0 \(\S+\) started", text) for text in before), before
    assert events[-1].kind == "end" and events[-1].status is not None
    assert events[-1].status.state is JobState.SUCCEEDED


def test_readme_commands_work_after_setup_as_written() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Run a real job end to end", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"`((?:\S*/)?ma-submit [^`]*)`", section)
    assert commands, section
    bare = [c for c in commands if not c.startswith(".venv/bin/ma-submit")]
    assert not bare, f"not on PATH after scripts/setup.sh: {bare}"
    assert "source .venv/bin/activate" in section
    tests = readme.split("## Run the tests", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"about \d+ minutes on a 2-core machine", tests)  # the README says how long the suite takes


def test_the_modelarts_docs_say_that_jobs_cannot_be_deleted_there(ma_env: Dict[str, str]) -> None:
    result = ma_submit(["delete", "--backend", "modelarts", "demo-20261126-120000-abcdef"], ma_env)
    assert result.returncode == 3
    answer = _error(result).removeprefix("ma-submit: error: ")
    docs = " ".join((REPO / "docs" / "modelarts.md").read_text().split())
    said = answer.replace("demo-20261126-120000-abcdef", "JOB_ID")
    assert f"`{said}` (exit code 3)" in docs, said
    assert "ma-submit prune --backend modelarts" in docs and "ma-submit stop" in docs


def test_the_upload_line_of_small_code_says_its_size(tmp_path: Path, ma_env: Dict[str, str], s3: object) -> None:
    from modelarts_env import BUCKET

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('training')\n")  # 18 bytes
    (tmp_path / "code" / "util.py").write_text("X = 1\n" * 200)  # 1200 bytes
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: small\nbackend: modelarts\ncode_dir: code\nboot_file: train.py\n"
        "image: swr.cn-north-4.myhuaweicloud.com/team/malaunch-torch:1.0\n"
        f"resources: {{flavor: modelarts.vm.cpu.8u}}\nmodelarts: {{obs_dir: 'obs://{BUCKET}/jobs/'}}\n"
    )
    result = ma_submit(["--detach", str(job)], ma_env)
    assert result.returncode == 0, result.stderr
    uploaded = [line for line in result.stderr.splitlines() if "file(s) uploaded" in line]
    assert len(uploaded) == 1 and "2 file(s) uploaded (1.2 KiB)" in uploaded[0], result.stderr
    assert "MiB" not in uploaded[0]
