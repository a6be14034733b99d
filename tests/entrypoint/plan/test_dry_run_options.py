"""``ma-entrypoint --dry-run`` alone reads its option without argparse and loads nothing the run alone needs.

The 32,768-rank dry-run is timed in bench/ (case ``latency``); here, without timing: the plan printed by
``--dry-run`` alone is the one printed when options make the shim build its parser, and that process never imports
argparse (nor shutil, which argparse's help formatter imports) nor the restart loop (``run.attempts``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

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
WATCHED = ["argparse", "shutil", "malaunch.entrypoint.run.attempts"]


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
def test_dry_run_alone_prints_the_same_plan_without_argparse(tmp_path: Path) -> None:
    alone = _dry_run(tmp_path, ["--dry-run"])
    parsed = _dry_run(tmp_path, ["--dry-run", "--log-dir", str(tmp_path / "logs")])
    plan = json.loads(alone.stdout)
    assert plan["method"] == "ranktable" and len(plan["processes"]) == 4
    assert alone.stdout == parsed.stdout
    assert alone.stderr.strip().splitlines()[-1] == "imported:"
    assert "argparse" in parsed.stderr.strip().splitlines()[-1]  # an option with a value still goes to argparse


@pytest.mark.process
def test_a_dry_run_from_a_plain_install_imports_neither_threads_nor_json(tmp_path: Path) -> None:
    # As a container runs it: the shim alone on the path and no site hooks. threading, the json package and the run's
    # report are never needed to print a plan, and cost a 32,768-rank dry-run milliseconds. (typing, and the re,
    # enum and collections it imports, are the language's own way to write the shim's records and types.)
    site = tmp_path / "site"
    (site / "malaunch").mkdir(parents=True)
    (site / "malaunch" / "entrypoint").symlink_to(Path(__file__).resolve().parents[3] / "entrypoint")
    boot = tmp_path / "train.py"
    boot.write_text("print('never run')\n")
    watched = ["threading", "json", "malaunch.entrypoint.report.report", *WATCHED]
    env = {**_env(tmp_path), "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-S", "-c", PROBE, ",".join(watched), "--dry-run", str(boot)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["processes"]) == 4
    assert done.stderr.strip().splitlines()[-1] == "imported:"


@pytest.mark.process
def test_the_command_as_installed_imports_no_more_than_the_shim(tmp_path: Path) -> None:
    # ma-entrypoint is installed as the plain script entrypoint/ma-entrypoint (the wheel's test checks that it is this
    # file): it must not import what the shim avoids (json, argparse for a dry run without options).
    site = tmp_path / "site"
    (site / "malaunch").mkdir(parents=True)
    repo = Path(__file__).resolve().parents[3]
    (site / "malaunch" / "entrypoint").symlink_to(repo / "entrypoint")
    boot = tmp_path / "train.py"
    boot.write_text("print('never run')\n")
    env = {**_env(tmp_path), "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-S", "-X", "importtime", str(repo / "entrypoint" / "ma-entrypoint"),
                           "--dry-run", str(boot)], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["processes"]) == 4
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "malaunch.entrypoint.main" in imported
    assert not imported & {"json", "argparse"}, sorted(imported & {"json", "argparse"})


#: ``main`` as :func:`console_main` calls it, then the collector's state on stderr: enabled, objects frozen.
COLLECTOR_PROBE = (
    "import gc, sys\n"
    "own = sys.argv[1] == 'own'\n"
    "sys.argv = ['ma-entrypoint', *sys.argv[2:]]\n"
    "from malaunch.entrypoint.main import main\n"
    "frozen = gc.get_freeze_count()\n"
    "code = main(own_process=own)\n"
    "sys.stdout.flush()\n"
    "print(f'collector: {gc.isenabled()} {gc.get_freeze_count() > frozen}', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


@pytest.mark.process
@pytest.mark.parametrize("dry_run", [True, False])
def test_the_shims_own_process_freezes_its_start_up_and_collects_after(tmp_path: Path, dry_run: bool) -> None:
    boot = tmp_path / "train.py"
    boot.write_text("print('the boot file ran')\n")
    table = tmp_path / "table.json"
    write_v10_table(table, 1, 2)  # one host: a real run starts its two ranks at once
    env = {**_env(tmp_path), "MA_NUM_HOSTS": "1", "VC_TASK_INDEX": "0", "RANK_TABLE_FILE": str(table),
           "MA_CURRENT_HOST_IP": "127.0.0.1"}  # fmt: skip
    for own, frozen in (("own", True), ("caller", False)):  # a caller of main() keeps its collector as it was
        argv = [sys.executable, "-c", COLLECTOR_PROBE, own, *(["--dry-run"] if dry_run else []), str(boot)]
        done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip().splitlines()[-1] == f"collector: True {frozen}", (own, done.stderr[-2000:])
        assert dry_run == ('"processes"' in done.stdout) and dry_run != ("the boot file ran" in done.stdout)


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
