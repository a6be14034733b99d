"""``ma-submit`` parsing, output and exit codes with click's CliRunner (nothing is started here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import click
import pytest
from click.testing import CliRunner, Result
from malaunch.sdk.cli import cli

VERBS = ["submit", "status", "logs", "stop", "wait", "list", "sweep"]


def run(args: List[str], home: Path) -> Result:
    return CliRunner().invoke(cli, args, env={"MALAUNCH_HOME": str(home)}, catch_exceptions=False)


def one_error_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ma-submit: error: "), lines[0]
    assert "Traceback" not in result.output
    return lines[0]


def write(folder: Path, text: str, name: str = "job.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text("print('hi')\n")
    path = folder / name
    path.write_text(text)
    return path


GOOD = (
    "name: demo\nrun_method: ranktable\ncode_dir: .\nboot_file: train.py\nresources: {hosts: 2, devices_per_host: 2}\n"
)


@pytest.mark.parametrize("args", [["--help"], ["-h"], *[[verb, "--help"] for verb in VERBS]])
def test_help_everywhere(args: List[str], home: Path) -> None:
    result = run(args, home)
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_no_arguments_shows_help_and_exits_2(home: Path) -> None:
    result = run([], home)
    assert result.exit_code == 2 and "Usage:" in result.output


def test_top_level_help_lists_every_verb(home: Path) -> None:
    result = run(["--help"], home)
    for verb in VERBS:
        assert verb in result.output


def test_dry_run_prints_hosts_and_starts_nothing(tmp_path: Path, home: Path) -> None:
    job = write(tmp_path / "proj", GOOD)
    result = run(["--dry-run", str(job)], home)
    assert result.exit_code == 0, result.stderr
    assert "host 0 (127.0.0.1" in result.output and "host 1 (127.0.0.2" in result.output
    assert "RANK_TABLE_FILE=" in result.output and "MALAUNCH_MASTER_PORT=<auto>" in result.output
    assert not (home / "jobs").exists()


def test_flags_override_the_file(tmp_path: Path, home: Path) -> None:
    job = write(tmp_path / "proj", GOOD)
    result = run(["--run-method", "torchrun", "--dry-run", "--output", "json", str(job)], home)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.output)
    assert data["spec"]["run_method"] == "torchrun"
    assert data["request"]["hosts"][1]["env"]["MA_RUN_METHOD"] == "torchrun"
    explicit = run(["submit", "--run-method", "msrun", "--dry-run", "--output", "json", str(job)], home)
    assert json.loads(explicit.output)["spec"]["run_method"] == "msrun"


def test_job_file_named_like_a_verb(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, GOOD, name="status")
    monkeypatch.chdir(tmp_path)
    result = run(["--dry-run", "./status"], home)
    assert result.exit_code == 0, result.stderr
    assert "dry run" in result.output
    verb = run(["status", "./status"], home)  # "status" is the verb: ./status is then a job id
    assert verb.exit_code == 4


def test_bad_job_file_exits_2_naming_the_field(tmp_path: Path, home: Path) -> None:
    job = write(tmp_path, GOOD.replace("hosts: 2", "hosts: 0"))
    result = run([str(job)], home)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "resources.hosts: must be >= 1, got 0" in line and str(job) in line
    assert not (home / "jobs").exists()


def test_unknown_key_exits_2_with_suggestion(tmp_path: Path, home: Path) -> None:
    job = write(tmp_path, GOOD.replace("devices_per_host", "gpus"))
    result = run([str(job)], home)
    assert result.exit_code == 2
    assert "did you mean devices_per_host?" in one_error_line(result)


def test_missing_boot_file_exits_2(tmp_path: Path, home: Path) -> None:
    job = write(tmp_path, GOOD.replace("train.py", "missing.py"))
    result = run([str(job)], home)
    assert result.exit_code == 2
    assert "boot_file" in one_error_line(result)


def test_a_boot_file_that_is_a_folder_is_called_one_and_exits_2(tmp_path: Path, home: Path) -> None:
    """The folder exists: the line says it is a directory, not that there is no such file."""
    job = write(tmp_path, GOOD.replace("train.py", "src"))
    (tmp_path / "src").mkdir()
    result = run([str(job)], home)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "boot_file: a directory in code_dir" in line and "no such file" not in line


def test_missing_job_file_exits_2(tmp_path: Path, home: Path) -> None:
    result = run([str(tmp_path / "nope.yaml")], home)
    assert result.exit_code == 2
    assert "cannot be read" in one_error_line(result)


def test_bad_option_is_one_line_exit_2(tmp_path: Path, home: Path) -> None:
    job = write(tmp_path, GOOD)
    result = run(["--run-method", "mpirun", str(job)], home)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "mpirun" in line and "--help" in line


@pytest.mark.parametrize("verb", ["status", "logs", "stop", "wait"])
def test_unknown_job_id_exits_4(verb: str, home: Path) -> None:
    result = run([verb, "no-such-job"], home)
    assert result.exit_code == 4
    assert "no job with id 'no-such-job'" in one_error_line(result)


def test_list_of_empty_home(home: Path) -> None:
    result = run(["list", "--output", "json"], home)
    assert result.exit_code == 0 and json.loads(result.output) == []
    assert run(["list"], home).exit_code == 0


def test_status_json_of_a_recorded_job(home: Path) -> None:
    job_dir = home / "jobs" / "demo-1"
    (job_dir / "hosts" / "0").mkdir(parents=True)
    state: Dict[str, object] = {
        "version": 1, "job_id": "demo-1", "name": "demo", "state": "FAILED", "exit_code": 6,
        "message": "host 0 exited with code 6", "created_at": 1.0, "started_at": 2.0, "ended_at": 3.0,
        "runner_pid": None,
        "hosts": [{"index": 0, "address": "127.0.0.1", "state": "EXITED", "pid": 4242, "exit_code": 6}],
    }  # fmt: skip
    (job_dir / "state.json").write_text(json.dumps(state))
    result = run(["status", "--output", "json", "demo-1"], home)
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert (data["id"], data["state"], data["exit_code"]) == ("demo-1", "FAILED", 6)
    text = run(["status", "demo-1"], home)
    assert "state:     FAILED" in text.output and "exit code 6" in text.output
    listed = json.loads(run(["list", "--output", "json"], home).output)
    assert len(listed) == 1
    assert {k: listed[0][k] for k in ("id", "state", "exit_code", "name")} == {
        "id": "demo-1", "state": "FAILED", "exit_code": 6, "name": "demo"
    }  # fmt: skip
    waited = run(["wait", "demo-1"], home)
    assert waited.exit_code == 6
    assert run(["stop", "demo-1"], home).exit_code == 0  # idempotent on an ended job


def test_docs_show_every_verb_and_flag() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text()
    ctx = click.Context(cli)  # the verbs are imported when asked for: every one of them, through the group
    for name, command in ((name, cli.get_command(ctx, name)) for name in cli.list_commands(ctx)):
        assert command is not None, name
        assert f"## {name}" in text or f"## {name} (the default)" in text, name
        for param in command.params:
            for flag in [*param.opts, *param.secondary_opts]:
                if flag.startswith("-") and flag not in ("-h", "--help"):
                    assert f"`{flag}" in text or f"{flag} " in text, f"docs/cli.md does not show {name} {flag}"
