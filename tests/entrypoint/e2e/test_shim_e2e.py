"""The real shim with real launchers: rank-table fan-out, torchrun across two emulated hosts, msrun, failures.

Every test runs ``python -m malaunch.entrypoint`` as a subprocess and checks that nothing of the job is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from shimutil import (
    MARK,
    SCRIPTS,
    assert_nothing_left,
    free_port,
    marked_env,
    marked_pids,
    shim,
    start_shim,
    start_sleeping_fan_out,
    torchrun_host_env,
    write_v10_table,
)


def test_dry_run_prints_the_torchrun_plan_of_the_issue(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    env = marked_env(
        {"MA_NUM_HOSTS": "2", "MA_NUM_GPUS": "4", "VC_TASK_INDEX": "1", "VC_WORKER_HOSTS": "a,b",
         "MA_RUN_METHOD": "torchrun"}
    )  # fmt: skip
    done = shim(["--dry-run", "train.py"], env, tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["method"] == "torchrun"
    argv: List[str] = plan["processes"][0]["argv"]
    assert argv[1:3] == ["-m", "torch.distributed.run"]
    for flag in ("--nnodes=2", "--nproc_per_node=4", "--node_rank=1", "--master_addr=a", "--master_port=18888",
                 "--rdzv_backend=static"):  # fmt: skip
        assert flag in argv
    assert any(a.startswith("--rdzv_id=") for a in argv)
    assert argv[-1] == str(tmp_path / "train.py")
    assert not list(tmp_path.glob("malaunch-logs")), "a dry run must not create anything"


@pytest.mark.process
def test_ranktable_fan_out_four_ranks_from_a_v10_table(tmp_path: Path) -> None:
    table = tmp_path / "rt"
    table.mkdir()
    write_v10_table(table / "jobstart_hccl.json", servers=2, devices=4)
    out = tmp_path / "out"
    out.mkdir()
    env = marked_env(
        {"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "1", "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.2",
         "RANK_TABLE_FILE": str(table), "MA_CURRENT_HOST_IP": "127.0.0.2",
         "MALAUNCH_DEVICE_WORKDIR": str(tmp_path / "ws"), "MALAUNCH_COORDINATOR": "0"}  # host 1 alone
    )  # fmt: skip
    done = shim([str(SCRIPTS / "dump_env.py"), str(out)], env, tmp_path)
    assert done.returncode == 0, done.stderr
    for local in range(4):
        rank = 4 + local
        record: Dict[str, Any] = json.loads((out / f"rank-{rank}.json").read_text())
        got = record["env"]
        assert got["RANK_TABLE_FILE"] == str(table / "jobstart_hccl.json")
        assert got["RANK_ID"] == got["RANK"] == str(rank)
        assert got["RANK_SIZE"] == got["WORLD_SIZE"] == "8"
        assert got["DEVICE_ID"] == got["ASCEND_DEVICE_ID"] == got["LOCAL_RANK"] == str(local)
        assert got["LOCAL_WORLD_SIZE"] == "4"
        assert record["cwd"] == str(tmp_path / "ws" / f"device{local}")
        assert f"[rank {rank}] rank {rank} wrote its environment" in done.stdout
        log = tmp_path / "malaunch-logs" / "node-1" / f"rank-{rank}.log"
        assert f"rank {rank} wrote its environment" in log.read_text()
    assert_nothing_left(env[MARK])


@pytest.mark.process
def test_ranktable_failing_rank_code_becomes_the_shim_code(tmp_path: Path) -> None:
    write_v10_table(tmp_path / "table.json", servers=1, devices=4)
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_GRACE_PERIOD": "5",
                      "MALAUNCH_MASTER_PORT": str(free_port())})
    done = shim([str(SCRIPTS / "dump_env.py"), str(tmp_path), "--fail-rank", "2", "--exit-code", "6",
                 "--sleep", "60"], env, tmp_path)  # fmt: skip
    assert done.returncode == 6, done.stderr
    assert "rank 2 failing with 6" in done.stderr
    report = json.loads((tmp_path / "malaunch-logs" / "node-0" / "report.json").read_text())
    assert json.dumps(report).count('"rank": 2') >= 1
    assert_nothing_left(env[MARK])


@pytest.mark.process
def test_a_rank_whose_output_is_one_long_line_has_its_end_in_the_report(tmp_path: Path) -> None:
    """A rank that wrote 1 MiB without a newline and failed: the report shows the end of that line, not "(it
    wrote no output)" (the tail kept in memory is smaller than the line, and its only line was taken for a
    fragment to drop)."""
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    (tmp_path / "train.py").write_text(
        "import os, sys\n"
        "if os.environ['RANK_ID'] == '1':\n"
        "    sys.stdout.write('x' * (1 << 20) + 'the end'); sys.stdout.flush(); sys.exit(5)\n"
    )
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_GRACE_PERIOD": "5"})
    done = shim(["train.py"], env, tmp_path)
    assert done.returncode == 5, done.stderr
    assert "(it wrote no output)" not in done.stderr
    report = json.loads((tmp_path / "malaunch-logs" / "node-0" / "report.json").read_text())
    assert report["root_cause"]["rank"] == 1
    assert report["root_cause"]["tail"][-1].endswith("xxthe end")
    shown = [line for line in done.stderr.splitlines() if line.startswith("    | ")]
    assert len(shown) == 1 and shown[0].endswith("xxthe end") and len(shown[0]) < 1200, shown  # cut to its end
    assert "characters before; the whole line is in the log]" in shown[0]
    assert_nothing_left(env[MARK])


@pytest.mark.process
@pytest.mark.torch
def test_torchrun_two_emulated_hosts_all_reduce_on_loopback(tmp_path: Path) -> None:
    port, coordinator = free_port(), free_port()
    out = tmp_path / "out"
    out.mkdir()
    procs = []
    marks = []
    for index in range(2):
        env = torchrun_host_env(index, gpus=2, port=port, job=f"job-{port}", log_dir=tmp_path / f"host{index}",
                                coordinator=coordinator)
        marks.append(env[MARK])
        procs.append(start_shim([str(SCRIPTS / "torch_allreduce.py"), "--out", str(out)], env, tmp_path))
    outputs = [p.communicate(timeout=240) for p in procs]
    for proc, (_, stderr) in zip(procs, outputs):
        assert proc.returncode == 0, stderr
    for rank in range(4):
        record = json.loads((out / f"rank-{rank}.json").read_text())
        assert record["value"] == 10.0
        assert record["env"]["WORLD_SIZE"] == "4"
        assert record["env"]["GROUP_RANK"] == str(rank // 2)
    assert "[rank 0] rank 0/4: all_reduce=10.0" in outputs[0][0]
    assert "all_reduce=10.0" in (tmp_path / "host1" / "rank-3.log").read_text()
    for mark in marks:
        assert_nothing_left(mark)


@pytest.mark.process
@pytest.mark.torch
def test_torchrun_failing_rank_code_becomes_the_shim_code(tmp_path: Path) -> None:
    env = marked_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", "MALAUNCH_GRACE_PERIOD": "5"})
    done = shim([str(SCRIPTS / "torch_allreduce.py"), "--fail-rank", "1", "--exit-code", "7"], env, tmp_path)
    assert done.returncode == 7, done.stdout + done.stderr
    report = json.loads((tmp_path / "malaunch-logs" / "node-0" / "report.json").read_text())
    assert report["exit_code"] == 7
    assert (report["root_cause"]["rank"], report["root_cause"]["exit_code"]) == (1, 7)
    assert report["root_cause"]["tail"][-1] == "rank 1 failing on purpose with 7"
    assert_nothing_left(env[MARK])


@pytest.mark.process
@pytest.mark.mindspore
def test_msrun_two_workers_all_reduce(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    env = marked_env({"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2", "MA_MSRUN_MASTER_PORT": str(free_port())})
    done = shim([str(SCRIPTS / "ms_allreduce.py"), "--out", str(out)], env, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["rank-0.txt", "rank-1.txt"]
    assert all(float(p.read_text()) == 3.0 for p in out.iterdir())
    assert "[rank 1] rank 1: allreduce=3.0" in done.stdout
    assert_nothing_left(env[MARK])


@pytest.mark.process
@pytest.mark.mindspore
def test_msrun_failing_worker_code_becomes_the_shim_code_promptly(tmp_path: Path) -> None:
    env = marked_env(
        {"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2", "MA_MSRUN_MASTER_PORT": str(free_port()),
         "MALAUNCH_GRACE_PERIOD": "5"}
    )  # fmt: skip
    done = shim([str(SCRIPTS / "ms_allreduce.py"), "--fail-rank", "1", "--exit-code", "9"], env, tmp_path,
                timeout=120)  # fmt: skip
    assert done.returncode == 9, done.stdout[-3000:] + done.stderr[-3000:]
    assert_nothing_left(env[MARK])


@pytest.mark.process
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_the_shim_ends_everything_and_exits_128_plus_signal(tmp_path: Path, sig: int) -> None:
    proc, env = start_sleeping_fan_out(tmp_path, grace="5")
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig
    assert_nothing_left(env[MARK])


@pytest.mark.process
def test_sigkill_to_the_shim_leaves_no_process(tmp_path: Path) -> None:
    proc, env = start_sleeping_fan_out(tmp_path, grace="2")
    assert len(marked_pids(env[MARK])) >= 3
    proc.kill()
    proc.communicate(timeout=30)
    assert_nothing_left(env[MARK], within=20)


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"MA_RUN_METHOD": "horovod"}, "MA_RUN_METHOD='horovod'"),
        ({"MA_NUM_HOSTS": "x"}, "MA_NUM_HOSTS='x'"),
        ({"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "5", "VC_WORKER_HOSTS": "a,b"}, "VC_TASK_INDEX='5'"),
    ],
)
def test_bad_environment_exits_2_with_one_line_and_no_traceback(
    tmp_path: Path, extra: Dict[str, str], fragment: str
) -> None:
    (tmp_path / "train.py").write_text("raise SystemExit(0)\n")
    done = shim(["train.py"], marked_env(extra), tmp_path, timeout=60)
    assert done.returncode == 2
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_missing_boot_file_is_caught_before_anything_starts(tmp_path: Path) -> None:
    done = shim(["nope.py"], marked_env({}), tmp_path, timeout=60)
    assert done.returncode == 2
    assert "BOOT_FILE='nope.py'" in done.stderr
    assert not (tmp_path / "malaunch-logs").exists()


def test_broken_rank_table_exits_2(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "t.json").write_text(
        json.dumps({"version": "1.0", "status": "completed", "server_list": "x"})
    )
    done = shim(["train.py"], marked_env({"RANK_TABLE_FILE": str(tmp_path / "t.json")}), tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "server_list" in done.stderr and "Traceback" not in done.stderr


def test_help_works() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "malaunch.entrypoint", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0
    assert "BOOT_FILE" in done.stdout and "--dry-run" in done.stdout


def test_entrypoint_imports_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import malaunch.entrypoint.main, malaunch.entrypoint\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "std = set(sys.stdlib_module_names) | {'malaunch'}\n"
        "bad = sorted(m for m in new if m not in std and not m.startswith('_'))\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


@pytest.mark.process
def test_v0_table_ranks_get_a_converted_v10_file(tmp_path: Path) -> None:
    source = Path(__file__).parents[1] / "data" / "ranktables" / "v0_jobstart_hccl.json"
    out = tmp_path / "out"
    out.mkdir()
    env = marked_env(
        {"RANK_TABLE_FILE": str(source), "MA_NUM_HOSTS": "3", "VC_TASK_INDEX": "1",
         "VC_WORKER_HOSTS": "h0,h1,h2", "MA_CURRENT_INSTANCE_NAME": "job-pod-2", "MALAUNCH_COORDINATOR": "0"}
    )  # fmt: skip
    done = shim([str(SCRIPTS / "dump_env.py"), str(out)], env, tmp_path)
    assert done.returncode == 0, done.stderr
    records = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in out.glob("rank-*.json")}
    assert sorted(records) == [2, 3]  # pods sort job-pod-1, job-pod-2, job-pod-10: job-pod-2 holds ranks 2 and 3
    converted = tmp_path / "malaunch-logs" / "node-1" / "rank_table" / "jobstart_hccl.json"
    for record in records.values():
        assert record["env"]["RANK_TABLE_FILE"] == str(converted)
    table = json.loads(converted.read_text())
    assert table["version"] == "1.0" and table["status"] == "completed"
    assert_nothing_left(env[MARK])
