"""``ma-entrypoint --dry-run``: the same plan with or without other options, from any install, and the command as
installed plans without loading the run phase (and runs a one-host job without loading the hosts' coordinator).

The 32,768-rank dry-run is timed in bench/ (cases ``latency`` and ``ranktable-scale``); here, without timing: the
plan printed by ``--dry-run`` alone is the one printed with more options, a bare install (no site hooks) prints it
too, and the installed command (the entry script) imports the planning phase (``start``) and none of the run
phase's modules, and runs a one-host job without any of the coordinator's (the entry script's choices by name,
docs/performance.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from pipeutil import into_a_pipe_that_fills_then_closes
from shimutil import write_v10_table

TABLE = Path(__file__).parents[1] / "data" / "ranktables" / "v1_0_2x4.json"

#: Runs the shim's console entry point as ``ma-entrypoint`` does, then prints (to stderr) which of the modules
#: named in argv[1] were imported by then.
PROBE = (
    "import sys\n"
    "watched = sys.argv[1].split(',')\n"
    "sys.argv = ['ma-entrypoint', *sys.argv[2:]]\n"
    "from malaunch.entrypoint.main import main\n"
    "code = main()\n"
    "sys.stdout.flush()\n"
    "print('imported:' + ','.join(m for m in watched if m in sys.modules), file=sys.stderr)\n"
    "sys.exit(code)\n"
)
WATCHED = ["argparse"]
#: The run phase: what ``malaunch.entrypoint.runphase`` adds to the planning phase (``malaunch.entrypoint.start``).
RUN_PHASE = {"malaunch.entrypoint.main", "malaunch.entrypoint.runphase", "malaunch.entrypoint.run.supervisor",
             "malaunch.entrypoint.run.attempts", "malaunch.entrypoint.run.hosts.jobloop",
             "malaunch.entrypoint.run.notifier", "malaunch.entrypoint.launchers.running"}  # fmt: skip


def _env(tmp_path: Path) -> Dict[str, str]:
    table = json.loads(TABLE.read_text())
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MA_", "VC_", "MALAUNCH_"))}
    env.update(
        MA_RUN_METHOD="ranktable",
        MA_NUM_HOSTS=str(len(table["server_list"])),
        VC_TASK_INDEX="1",
        MA_VJ_NAME="dry",
        MA_TASK_NAME="worker",
        RANK_TABLE_FILE=str(TABLE),
        MA_CURRENT_HOST_IP=table["server_list"][1]["server_id"],
        MALAUNCH_LOG_DIR=str(tmp_path / "logs"),
    )
    return env


def _dry_run(tmp_path: Path, options: List[str]) -> subprocess.CompletedProcess[str]:
    boot = tmp_path / "train.py"
    boot.write_text("print('never run')\n")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(WATCHED), *options, str(boot), "--epochs", "2"],
        env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.process
def test_dry_run_alone_prints_the_same_plan_as_with_options(tmp_path: Path) -> None:
    alone = _dry_run(tmp_path, ["--dry-run"])
    parsed = _dry_run(tmp_path, ["--dry-run", "--log-dir", str(tmp_path / "logs")])
    plan = json.loads(alone.stdout)
    assert plan["method"] == "ranktable" and len(plan["processes"]) == 4
    assert alone.stdout == parsed.stdout
    assert parsed.stderr.strip().splitlines()[-1] == "imported:"  # the shim's few options need no argparse


@pytest.mark.process
def test_a_dry_run_from_a_plain_install_prints_the_plan(tmp_path: Path) -> None:
    # As a container runs it: the shim alone on the path and no site hooks.
    site = tmp_path / "site"
    (site / "malaunch").mkdir(parents=True)
    (site / "malaunch" / "entrypoint").symlink_to(Path(__file__).resolve().parents[3] / "entrypoint")
    boot = tmp_path / "train.py"
    boot.write_text("print('never run')\n")
    env = {**_env(tmp_path), "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-S", "-c", PROBE, "json", "--dry-run", str(boot)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["processes"]) == 4


def _installed_dry_run(tmp_path: Path, *options: str, env: Optional[Dict[str, str]] = None,
                       boot_text: str = "print('never run')\n") -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``entrypoint/ma-entrypoint`` (the installed command: the wheel's test checks that it is this file) run with
    ``options`` under ``-X importtime``, the shim alone on the path (in ``env``: the dry run's by default)."""
    site = tmp_path / "site"
    if not site.exists():
        (site / "malaunch").mkdir(parents=True)
        (site / "malaunch" / "entrypoint").symlink_to(Path(__file__).resolve().parents[3] / "entrypoint")
    boot = tmp_path / "train.py"
    boot.write_text(boot_text)
    env = {**(_env(tmp_path) if env is None else env), "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    script = Path(__file__).resolve().parents[3] / "entrypoint" / "ma-entrypoint"
    return subprocess.run([sys.executable, "-S", "-X", "importtime", str(script), *options, str(boot)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip


def _imported(done: subprocess.CompletedProcess[str]) -> set[str]:
    return {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.process
def test_the_command_as_installed_plans_without_the_run_phase(tmp_path: Path) -> None:
    done = _installed_dry_run(tmp_path, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["processes"]) == 4
    imported = _imported(done)
    assert "malaunch.entrypoint.start" in imported
    assert not imported & RUN_PHASE, sorted(imported & RUN_PHASE)
    assert not imported & {"argparse", "socket", "malaunch.entrypoint.plan.resolve"}  # no option parser, no names


@pytest.mark.process
def test_the_command_as_installed_says_a_bad_option_as_the_shim_does(tmp_path: Path) -> None:
    # the entry script reads the options only to choose the phases it imports; the shim's main refuses them
    done = _installed_dry_run(tmp_path, "--dry")
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert len(lines) == 1 and "--dry" in lines[0] and "Traceback" not in done.stderr
    assert "malaunch.entrypoint.runphase" in _imported(done)


@pytest.mark.process
def test_the_command_as_installed_runs_one_host_without_the_coordinator(tmp_path: Path) -> None:
    # The run phase picks the coordinated loop only for a plan of several hosts (its modules import it no sooner).
    table = tmp_path / "table.json"
    write_v10_table(table, 1, 2)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MA_", "VC_", "MALAUNCH_"))}
    env.update(MA_RUN_METHOD="ranktable", RANK_TABLE_FILE=str(table), MALAUNCH_LOG_DIR=str(tmp_path / "logs"))
    done = _installed_dry_run(tmp_path, env=env, boot_text="print('trained')\n")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == ["[rank 0] trained", "[rank 1] trained"]
    imported = _imported(done)
    assert {"malaunch.entrypoint.runphase", "malaunch.entrypoint.run.attempts"} <= imported
    coordinator = sorted(name for name in imported if name.startswith("malaunch.entrypoint.run.hosts."))
    assert coordinator == [] and not imported & {"secrets", "random", "hashlib", "hmac"}, coordinator


@pytest.mark.process
def test_a_misspelt_dry_run_is_still_refused_by_the_parser(tmp_path: Path) -> None:
    boot = tmp_path / "train.py"
    boot.write_text("print('never run')\n")
    done = subprocess.run(
        [sys.executable, "-m", "malaunch.entrypoint", "--dry", str(boot)],
        env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--dry" in done.stderr and "Traceback" not in done.stderr


def test_a_reader_that_leaves_before_the_plans_end_is_one_line(tmp_path: Path) -> None:
    """A 16-rank host's plan (about 12 KB: more than a page and than Python's 8 KiB buffer) into a one-page pipe whose
    reader leaves once it is full: 141 and one line saying after how many of the plan's bytes. Python's own write
    gave 0 and no word here, and a traceback (BrokenPipeError out of ``main``) for a plan of the same size once."""
    boot = tmp_path / "train.py"
    boot.write_text("print('never run')\n")
    table = tmp_path / "table.json"
    write_v10_table(table, 2, 16)
    env = {**_env(tmp_path), "RANK_TABLE_FILE": str(table), "MA_CURRENT_HOST_IP": "127.0.0.2"}
    argv = [sys.executable, "-m", "malaunch.entrypoint", "--dry-run", str(boot), "--epochs", "2"]
    whole = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, timeout=120)
    assert whole.returncode == 0 and len(whole.stdout) > 2 * 4096, whole.stderr
    code, err, fitted = into_a_pipe_that_fills_then_closes(argv, env)
    assert (code, err) == (141, f"ma-entrypoint: error: the plan's output stopped after {fitted:,} of its "
                                f"{len(whole.stdout):,} bytes: whoever read it closed the pipe; send it to a file to "
                                "keep all of it\n")  # fmt: skip


def test_a_full_disk_under_the_plan_is_one_line(tmp_path: Path) -> None:
    """``--dry-run > /dev/full``: 3 and one line, not 0 with no plan (nor a traceback)."""
    boot = tmp_path / "train.py"
    boot.write_text("print('never run')\n")
    argv = [sys.executable, "-m", "malaunch.entrypoint", "--dry-run", str(boot)]
    whole = subprocess.run(argv, env=_env(tmp_path), cwd=tmp_path, capture_output=True, timeout=120)
    assert whole.returncode == 0, whole.stderr
    with open("/dev/full", "wb") as full:
        done = subprocess.run(argv, env=_env(tmp_path), cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=120)  # fmt: skip
    assert (done.returncode, done.stderr) == (3, f"ma-entrypoint: error: the plan's output stopped after 0 of its "
                                                 f"{len(whole.stdout):,} bytes: the write failed: No space left on "
                                                 "device; free space or send it elsewhere\n")  # fmt: skip
