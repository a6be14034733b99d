"""End to end with real processes: ``ma-submit`` and the Python API on the local backend, through the real shim.

Every test uses an isolated MALAUNCH_HOME and ends by proving nothing of its jobs is left running.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml
from malaunch.sdk import Job, JobState
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.backends.local.jobdir import job_processes, pid_alive, read_json
from prefix_checks import one_prefix
from sdkutil import TEMPLATES, VENV_BIN, assert_nothing_running, interrupted, job_ids, ma_submit, wait_for, write_job

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("cleanup_jobs")]

SLEEPER = """
    import os, signal, sys, time
    print(f"ready rank {os.environ.get('RANK_ID')} on {os.environ['MA_CURRENT_HOST_IP']}", flush=True)
    if os.environ.get("IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)
"""


def status_json(job_id: str, env: Dict[str, str]) -> Dict[str, Any]:
    result = ma_submit(["status", "--output", "json", job_id], env)
    assert result.returncode == 0, result.stderr
    data: Dict[str, Any] = json.loads(result.stdout)
    return data


def test_torchrun_template_two_hosts_all_reduce(cli_env: Dict[str, str], home: Path) -> None:
    """The README's run command, as a user runs it: no local capacity set, so the queue counts this machine's CPUs
    (on a 2-core machine the job's 4 ranks are more than that, and it runs alone instead of being refused)."""
    env = {name: value for name, value in cli_env.items() if name != "MALAUNCH_LOCAL_CAPACITY"}
    result = ma_submit(["--run-method", "torchrun", str(TEMPLATES / "torchrun-ddp" / "job.yaml")], env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all_reduce OK across 4 ranks" in result.stdout
    sums = [line for line in result.stdout.splitlines() if "all_reduce sum = 10, expected 10" in line]
    assert len(sums) == 4
    assert {line.split(" rank ")[0] for line in sums} == {"[host 0", "[host 1"}
    assert "host 0 (127.0.0.1) started" in result.stderr and "host 1 (127.0.0.2) finished, exit code 0" in result.stderr
    (job_id,) = job_ids(home)
    status = status_json(job_id, cli_env)
    assert (status["state"], status["exit_code"]) == ("SUCCEEDED", 0)
    assert_nothing_running(job_id)


def test_each_console_line_has_one_prefix_naming_its_host_and_writer(tmp_path: Path, cli_env: Dict[str, str]) -> None:
    """Two hosts of real shims: each shim's console line carries its one prefix, and the merged console names the
    host in that same prefix (it showed ``[host 1] [rank 2] ...`` and ``[host 0] [ma-entrypoint] ...``), in the
    foreground, in ``logs`` and in ``logs -f``; the rank and host filters read it."""
    script = """
        import os, sys
        print(f"out of rank {os.environ['RANK_ID']}", flush=True)
        print(f"err of rank {os.environ['RANK_ID']}", file=sys.stderr, flush=True)
    """
    job = write_job(tmp_path / "one", script, name="one", resources={"hosts": 2, "devices_per_host": 2})
    result = ma_submit([str(job)], cli_env)
    assert result.returncode == 0, result.stdout + result.stderr
    shown = one_prefix(result.stdout.splitlines())
    ranks = sorted((w.host, w.writer, w.text) for w in shown if w.writer and w.writer.startswith("rank "))
    assert ranks == sorted((r // 2, f"rank {r}", f"{kind} of rank {r}") for r in range(4) for kind in ("out", "err"))
    for host in (0, 1):
        own = [w.text for w in shown if (w.host, w.writer) == (host, "ma-entrypoint")]
        assert any(text.startswith("exit code 0; report: ") for text in own), own
    assert {w.writer for w in shown} == {"ma-entrypoint", "rank 0", "rank 1", "rank 2", "rank 3"}
    (job_id,) = [line.split()[3] for line in result.stderr.splitlines() if line.startswith("ma-submit: submitted")]
    for args in ([job_id], ["-f", job_id]):
        logs = ma_submit(["logs", *args], cli_env)
        assert sorted(one_prefix(logs.stdout.splitlines()), key=str) == sorted(shown, key=str), logs.stderr
    by_rank = ma_submit(["logs", "--rank", "2", job_id], cli_env).stdout.splitlines()
    assert sorted(by_rank) == ["[host 1 rank 2] err of rank 2", "[host 1 rank 2] out of rank 2"]
    by_host = one_prefix(ma_submit(["logs", "--host", "1", job_id], cli_env).stdout.splitlines())
    assert by_host and {w.host for w in by_host} == {1}
    assert_nothing_running(job_id)


def test_failing_rank_exit_code_reaches_ma_submit(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    script = """
        import os, sys, time
        if os.environ["RANK_ID"] == "1":
            time.sleep(0.5)
            print("rank 1 gives up with 6", flush=True)
            sys.exit(6)
        time.sleep(600)
    """
    job = write_job(
        tmp_path / "fail",
        script,
        name="fail6",
        resources={"hosts": 2, "devices_per_host": 2},
        launcher={"grace_period": 3},
    )
    result = ma_submit([str(job)], cli_env)
    assert result.returncode == 6, result.stdout + result.stderr
    assert "rank 1 gives up with 6" in result.stdout
    assert "host 0 (127.0.0.1) failed, exit code 6" in result.stderr
    (job_id,) = job_ids(home)
    assert_nothing_running(job_id)
    status = status_json(job_id, cli_env)
    assert (status["state"], status["exit_code"]) == ("FAILED", 6)
    assert status["hosts"][0]["exit_code"] == 6 and "root cause rank 1" in status["hosts"][0]["detail"]
    # host 1 ends with the job's code, its report naming host 0's rank 1 (the hosts' coordinator), unless the
    # runner, playing the platform, stopped it first once host 0 had failed
    assert status["hosts"][1]["exit_code"] in (6, 128 + signal.SIGTERM)
    if status["hosts"][1]["exit_code"] == 6:
        said = "root cause rank 1 on host 0 (127.0.0.1) exited with 6; class user_error; log "
        assert said in status["hosts"][1]["detail"]
    assert "host 0" in status["message"]  # the job's failure is host 0's, whichever shim exited first


@pytest.mark.parametrize("ignore_term", [False, True], ids=["polite", "ignores-sigterm"])
def test_detach_then_status_logs_stop_from_other_processes(
    tmp_path: Path, cli_env: Dict[str, str], ignore_term: bool
) -> None:
    env = {"IGNORE_TERM": "1"} if ignore_term else {}
    job = write_job(
        tmp_path / "sleep", SLEEPER, name="sleeper", resources={"hosts": 2, "devices_per_host": 1},
        env=env, launcher={"grace_period": 2},
    )  # fmt: skip
    submitted = ma_submit(["--detach", "--output", "json", str(job)], cli_env)
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["id"]

    def both_ready() -> bool:
        out = ma_submit(["logs", job_id], cli_env).stdout
        return (
            "[host 0 rank 0] ready rank 0 on 127.0.0.1" in out
            and "[host 1 rank 1] ready rank 1 on 127.0.0.2" in out
        )

    wait_for(both_ready, what="both hosts to print 'ready'")
    status = status_json(job_id, cli_env)
    assert status["state"] == "RUNNING" and [h["state"] for h in status["hosts"]] == ["RUNNING", "RUNNING"]
    assert job_processes(job_id)
    listed = json.loads(ma_submit(["list", "--output", "json"], cli_env).stdout)
    assert [(j["id"], j["state"]) for j in listed] == [(job_id, "RUNNING")]

    stopped = ma_submit(["stop", job_id], cli_env)
    assert stopped.returncode == 0, stopped.stderr
    assert f"job {job_id} STOPPED" in stopped.stdout
    assert_nothing_running(job_id)  # stop returns only when nothing is left
    status = status_json(job_id, cli_env)
    assert (status["state"], status["exit_code"]) == ("STOPPED", 143)
    again = ma_submit(["stop", job_id], cli_env)  # idempotent
    assert again.returncode == 0 and "STOPPED" in again.stdout
    followed = ma_submit(["logs", "-f", job_id], cli_env, timeout=60)  # ends because the job has ended
    assert followed.returncode == 0 and "ready rank 0" in followed.stdout
    assert ma_submit(["wait", job_id], cli_env).returncode == 143


def test_killing_the_follower_does_not_stop_the_job(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    script = """
        import time
        print("started", flush=True)
        time.sleep(3)
        print("done", flush=True)
    """
    job = write_job(tmp_path / "k", script, name="survivor", resources={"hosts": 2, "devices_per_host": 1})
    follower = subprocess.Popen(
        [os.path.join(VENV_BIN, "ma-submit"), str(job)], env=cli_env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: len(job_ids(home)) == 1, what="the job directory")
        (job_id,) = job_ids(home)
        wait_for(lambda: "started" in ma_submit(["logs", job_id], cli_env).stdout, what="the job to start")
        follower.kill()
        follower.wait(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait(timeout=30)
        if follower.stdout is not None:
            follower.stdout.close()
        if follower.stderr is not None:
            follower.stderr.close()
    assert follower.returncode == -signal.SIGKILL
    assert status_json(job_id, cli_env)["state"] in ("RUNNING", "SUCCEEDED")
    waited = ma_submit(["wait", job_id], cli_env)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    status = status_json(job_id, cli_env)
    assert (status["state"], status["exit_code"]) == ("SUCCEEDED", 0)
    logs = ma_submit(["logs", job_id], cli_env).stdout
    assert "[host 0 rank 0] done" in logs and "[host 1 rank 1] done" in logs
    assert_nothing_running(job_id)


def test_python_api_submit_wait(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALAUNCH_HOME", str(home))
    script = """
        import os
        print(f"hello from rank {os.environ['RANK_ID']} of {os.environ['RANK_SIZE']}", flush=True)
    """
    job = write_job(tmp_path / "api", script, name="api", resources={"hosts": 1, "devices_per_host": 2})
    handle = Job.from_yaml(str(job)).submit()
    final = handle.wait(timeout=120)
    assert final.state is JobState.SUCCEEDED and final.exit_code == 0
    assert handle.status() == final
    lines = list(handle.logs())
    assert "[host 0 rank 0] hello from rank 0 of 2" in lines and "[host 0 rank 1] hello from rank 1 of 2" in lines
    assert list(handle.logs(follow=True)) == lines
    assert handle.stop().state is JobState.SUCCEEDED  # stopping an ended job changes nothing
    assert_nothing_running(handle.id)


def test_runner_killed_then_stop_cleans_up(tmp_path: Path, home: Path) -> None:
    backend = LocalBackend(home=str(home))
    job = write_job(tmp_path / "r", SLEEPER, name="orphan", resources={"hosts": 2, "devices_per_host": 1})
    handle = Job.from_yaml(str(job)).submit(backend=backend)
    wait_for(lambda: sum("ready" in line for line in handle.logs()) == 2, what="both hosts")
    state = read_json(os.path.join(str(home), "jobs", handle.id, "state.json")) or {}
    runner = int(state["runner_pid"])
    os.kill(runner, signal.SIGKILL)

    def runner_gone() -> bool:
        handle.status()  # reaps the runner, a child of this process
        return not pid_alive(runner)

    wait_for(runner_gone, what="the runner to die")
    status = handle.status()
    assert status.state is JobState.RUNNING and "still run" in status.message  # the hosts do; their reports will tell
    assert handle.stop().state is JobState.STOPPED
    assert_nothing_running(handle.id)


def test_ranktable_template(cli_env: Dict[str, str], home: Path) -> None:
    result = ma_submit([str(TEMPLATES / "ranktable" / "job.yaml")], cli_env)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert sum("rank table OK" in line for line in lines) == 4
    assert sum(re.search(r"rank \d step 20/20 loss", line) is not None for line in lines) == 4
    assert "after 20 steps on 4 ranks" in result.stdout  # rank 0's final weights (the template checkpoints too)
    (job_id,) = job_ids(home)
    assert_nothing_running(job_id)


@pytest.mark.mindspore
def test_msrun_template_one_host_two_workers(cli_env: Dict[str, str], home: Path) -> None:
    result = ma_submit([str(TEMPLATES / "msrun-mindspore" / "job.yaml")], cli_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "after 20 steps on 2 workers" in result.stdout  # rank 0's final weights, averaged over both
    assert sum(re.search(r"rank \d step 20/20 loss", line) is not None for line in result.stdout.splitlines()) == 2
    assert "[INFO]" not in result.stdout + result.stderr  # the template's env says: MindSpore errors only
    (job_id,) = job_ids(home)
    assert_nothing_running(job_id)


@pytest.mark.mindspore
@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2")
def test_msrun_two_hosts_in_network_namespaces(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    code = tmp_path / "msrun2"
    shutil.copytree(TEMPLATES / "msrun-mindspore", code)
    data = yaml.safe_load((code / "job.yaml").read_text())
    data["resources"] = {"hosts": 2, "devices_per_host": 1}
    (code / "job.yaml").write_text(yaml.safe_dump(data))
    result = ma_submit([str(code / "job.yaml")], cli_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "after 20 steps on 2 workers" in result.stdout
    assert "[host 1 rank 1] rank 1 step 20/20 loss" in result.stdout
    (job_id,) = job_ids(home)
    assert_nothing_running(job_id)


def test_the_suite_starts_processes_that_take_ctrl_c() -> None:
    # However the suite itself was started (in a shell's background SIGINT is inherited ignored), what it starts
    # takes Ctrl-C (tests/conftest.py puts the default back): the Ctrl-C tests below depend on it.
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "True"


def test_ctrl_c_stops_following_not_the_job(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    job = write_job(tmp_path / "c", SLEEPER, name="ctrlc", resources={"hosts": 1, "devices_per_host": 1})
    def started(_pid: int) -> bool:
        ids = job_ids(home)
        return len(ids) == 1 and "ready" in ma_submit(["logs", ids[0]], cli_env).stdout

    code, _, err = interrupted([str(job)], cli_env, started)
    (job_id,) = job_ids(home)
    assert code == 130
    assert f"job {job_id} keeps running" in err and "Traceback" not in err
    assert status_json(job_id, cli_env)["state"] == "RUNNING"
    assert ma_submit(["stop", job_id], cli_env).returncode == 0
    assert_nothing_running(job_id)
