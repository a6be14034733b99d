"""Checkpoints across a host lost (issue 39), through the local backend: real runner, real shims, torchrun with gloo.

``ckpt_train.py`` trains deterministically, saves every EVERY steps through ``malaunch.entrypoint.checkpoint`` and
records each step it trains (rank, attempt, world size). Host 1's pod is killed from outside in the middle of the
run, once the ranks have recorded step KILL_AFTER, or lost and given a machine again (``ma-submit host
lose|restore``):

- the platform (the runner) replaces it, the job restarts on both hosts from the newest complete checkpoint, and
  the final weights equal, bit for bit, those of the same job without a failure; no rank trains more steps twice
  than one checkpoint interval;
- in an elastic job (``min_hosts: 1``) host 1 is lost for good: host 0 goes on alone from the newest complete
  checkpoint, not from step 0 (the world size changes, so the weights are not compared);
- the checkpoint the hosts agreed on is gone before the next attempt: no host starts a rank, the job ends with
  exit 2, and ``ma-submit status`` and ``events`` say which host, which checkpoint and step, and the class.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
import yaml
from malaunch.entrypoint.public import descendants, env_has, read_environ
from malaunch.sdk.backends.local.backend import LocalBackend
from sdkutil import assert_nothing_running, cli_environ, job_ids, ma_submit, wait_for

pytestmark = [pytest.mark.process, pytest.mark.torch, pytest.mark.timeout(900)]  # two jobs each, on a loaded machine

SCRIPTS = Path(__file__).resolve().parents[2] / "entrypoint" / "scripts"
TOTAL, EVERY, KILL_AFTER = 15, 3, 5
_RESUMES = re.compile(r"attempt \d+ resumes from \S+/step-\d{8} \(step (\d+)")


def _job(tmp_path: Path, name: str, pause: str, fault: str = "none", **launcher: Any) -> Path:
    out = tmp_path / f"out-{name}"
    out.mkdir()
    job = tmp_path / f"job-{name}.yaml"
    job.write_text(yaml.safe_dump({
        "name": name, "run_method": "torchrun", "code_dir": str(SCRIPTS), "boot_file": "ckpt_train.py",
        "args": [str(out), str(TOTAL), str(EVERY), fault, pause], "resources": {"hosts": 2, "devices_per_host": 1},
        "env": {"OMP_NUM_THREADS": "1", "MALAUNCH_RESTART_BACKOFF": "0.2"}, "checkpoint": {"keep": 2},
        "launcher": {"grace_period": 3, "heartbeat_timeout": 3, **launcher},
    }))  # fmt: skip
    return job


def _records(out: Path) -> Dict[int, List[Dict[str, int]]]:
    """Every step each rank recorded, in order (its attempt and world size with it)."""
    found: Dict[int, List[Dict[str, int]]] = {}
    for path in sorted(out.glob("trained-*.jsonl")):
        rank = int(path.stem.split("-")[1])
        found[rank] = [json.loads(line) for line in path.read_text().splitlines()]
    return found


def _reached(home: Path, job_id: str) -> Optional[int]:
    """The smallest step the ranks of attempt 0 recorded with ``progress`` (None: not both yet)."""
    folder = home / "jobs" / job_id / "checkpoints" / ".progress"
    steps = []
    for rank in (0, 1):
        try:
            record = json.loads((folder / f"rank-{rank}.json").read_text())
        except (OSError, ValueError):
            return None
        steps.append(int(record["step"]))
    return min(steps)


def _kill_pod(home: Path, job_id: str, host: int) -> None:
    """Once both ranks have recorded step KILL_AFTER, host ``host``'s pod dies: its shim and everything under it,
    each proven the job's by its MALAUNCH_JOB_ID."""
    wait_for(lambda: (_reached(home, job_id) or 0) >= KILL_AFTER, 180, f"both ranks at step {KILL_AFTER}")
    root = LocalBackend(home=str(home)).status(job_id).hosts[host].pid
    assert root is not None
    for pid in [root] + [info.pid for info in descendants(root)]:
        environ = read_environ(pid)
        if environ is not None and env_has(environ, "MALAUNCH_JOB_ID", job_id):
            os.kill(pid, signal.SIGKILL)


def _ended(cli_env: Dict[str, str], job_id: str) -> str:
    """Wait for the job; its logs (every host's console) once it has succeeded."""
    done = ma_submit(["wait", job_id], cli_env, timeout=600)
    status = json.loads(ma_submit(["status", "--output", "json", job_id], cli_env).stdout)
    logs = ma_submit(["logs", job_id], cli_env).stdout
    assert (status["state"], status["exit_code"]) == ("SUCCEEDED", 0), (done.stdout[-3000:], logs[-3000:], status)
    assert_nothing_running(job_id)
    return logs


def _submit(job: Path, cli_env: Dict[str, str], home: Path) -> str:
    before = set(job_ids(home))
    submitted = ma_submit(["--detach", str(job)], cli_env)
    assert submitted.returncode == 0, submitted.stderr
    (job_id,) = set(job_ids(home)) - before
    return job_id


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Tuple[str, Dict[str, str]]:
    """The job without a failure, run once for both cases of a host replaced, whose final weights must equal its
    own: its logs and those weights. It has a home of its own and leaves nothing running."""
    folder = tmp_path_factory.mktemp("clean")
    home = folder / "home"
    home.mkdir()
    env = cli_environ(home)
    job_id = _submit(_job(folder, "clean", "0"), env, home)
    try:
        logs = _ended(env, job_id)
    except BaseException:
        LocalBackend(home=str(home)).stop(job_id)
        raise
    return logs, json.loads((folder / "out-clean" / "final.json").read_text())


@pytest.mark.usefixtures("cleanup_jobs")
@pytest.mark.parametrize("how", ["pod killed", "lost and restored"])
def test_a_host_lost_and_replaced_resumes_bit_for_bit(tmp_path: Path, cli_env: Dict[str, str], home: Path,
                                                      how: str, clean: Tuple[str, Dict[str, str]]) -> None:  # fmt: skip
    """The pod killed from outside is replaced by the platform (the runner); a host lost for good
    (``ma-submit host lose``) is given a machine again (``ma-submit host restore``) while the other waits."""
    clean_logs, reference = clean
    assert "resumes from" not in clean_logs
    job_id = _submit(_job(tmp_path, "lost", "0.3", max_restarts=2, host_wait=60), cli_env, home)
    if how == "pod killed":
        _kill_pod(home, job_id, 1)
    else:
        wait_for(lambda: (_reached(home, job_id) or 0) >= KILL_AFTER, 180, f"both ranks at step {KILL_AFTER}")
        for verb in ("lose", "restore"):
            done = ma_submit(["host", verb, job_id, "1"], cli_env)
            assert done.returncode == 0, (verb, done.stdout, done.stderr)
    logs = _ended(cli_env, job_id)
    assert json.loads((tmp_path / "out-lost" / "final.json").read_text()) == reference
    report = json.loads((home / "jobs" / job_id / "hosts" / "0" / "report.json").read_text())
    assert report["attempts"][0]["job_cause"]["kind"] == "host_lost", report["attempts"][0]
    (resumed,) = [int(step) for step in _RESUMES.findall(logs)[:1]]
    assert resumed >= KILL_AFTER - KILL_AFTER % EVERY and resumed % EVERY == 0, logs[-3000:]
    records = _records(tmp_path / "out-lost")
    assert sorted(records) == [0, 1]
    for rank, steps in records.items():
        trained = [record["step"] for record in steps]
        assert sorted(set(trained)) == list(range(1, TOTAL + 1)), (rank, trained)
        twice = sum(count - 1 for count in Counter(trained).values())  # none: lost just after a save
        assert twice <= EVERY, (rank, trained)
        after = [record["step"] for record in steps if record["attempt"] > 0]
        assert after[0] == resumed + 1, (rank, steps)  # the next attempt went on from the checkpoint


@pytest.mark.usefixtures("cleanup_jobs")
def test_an_elastic_shrink_goes_on_from_the_newest_complete_checkpoint(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job_id = _submit(_job(tmp_path, "shrink", "0.3", min_hosts=1, host_wait=3), cli_env, home)
    wait_for(lambda: (_reached(home, job_id) or 0) >= KILL_AFTER, 180, f"both ranks at step {KILL_AFTER}")
    LocalBackend(home=str(home)).lose_host(job_id, 1)
    logs = _ended(cli_env, job_id)
    records = [record for steps in _records(tmp_path / "out-shrink").values() for record in steps]
    before = [record["step"] for record in records if record["world"] == 2]
    alone = [record["step"] for record in records if record["world"] == 1]
    assert alone and alone[-1] == TOTAL and max(before) >= KILL_AFTER, records
    resumed = [int(step) for step in _RESUMES.findall(logs)]
    assert resumed and resumed[0] >= KILL_AFTER - KILL_AFTER % EVERY, logs[-3000:]
    assert alone[0] == resumed[0] + 1, (alone, resumed)  # progress kept: the first step alone follows the checkpoint
    assert max(before) - resumed[0] <= EVERY, (before, resumed)  # at most one interval trained again


@pytest.mark.usefixtures("cleanup_jobs")
def test_a_job_ended_by_a_host_that_cannot_hold_the_agreed_checkpoint_says_so_in_status_and_events(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    """Rank 1 removes step 6, the newest complete checkpoint (the hosts share the job's folder, and the coordinator
    said it complete), and dies after step 8: attempt 1 is to resume from step 6 on every host, and neither host
    holds it any more. No rank starts, the job ends with exit 2 (class launcher_misuse), and what ``ma-submit
    status`` and ``events`` say of each host names the host, the checkpoint, its step and the class. On the old
    code the refused attempt was not in the hosts' reports: both named attempt 0's cause (rank 1 killed by SIGKILL,
    class signal), and nothing named the checkpoint."""
    job_id = _submit(_job(tmp_path, "wiped", "0.5", "wipe:1:8", max_restarts=2, restart_on="always"), cli_env, home)
    done = ma_submit(["wait", job_id], cli_env, timeout=600)
    status = json.loads(ma_submit(["status", "--output", "json", job_id], cli_env).stdout)
    text = ma_submit(["status", job_id], cli_env).stdout
    events = ma_submit(["events", job_id], cli_env).stdout
    logs = ma_submit(["logs", job_id], cli_env).stdout
    assert (status["state"], status["exit_code"]) == ("FAILED", 2), (done.stdout[-3000:], logs[-3000:], status)
    assert_nothing_running(job_id)
    assert "rank 0 attempt 1" not in logs and "rank 1 attempt 1" not in logs  # no rank started again
    folder = home / "jobs" / job_id / "checkpoints" / "step-00000006"
    said = re.compile(rf"host [01] \(127\.0\.0\.\d+\) cannot resume from checkpoint {re.escape(str(folder))} "
                      r"\(step 6\), the newest the job's hosts completed together: [^\n]* \(ma-entrypoint on host "
                      r"[01] \(127\.0\.0\.\d+\) exited with 2\); class launcher_misuse")  # fmt: skip
    for host in status["hosts"]:
        assert host["exit_code"] == 2, host
        assert said.search(host["detail"]), host["detail"]
    lines = [line for line in text.splitlines() if "cannot resume" in line]
    assert len(lines) == 3 and all(said.search(line) for line in lines), text  # the job's message, each host's
    roots = [line for line in events.splitlines() if "RootCause" in line]
    assert len(roots) == 2 and all(said.search(line) for line in roots), events
    failed = [line for line in events.splitlines() if " Failed " in line]
    assert len(failed) == 1 and said.search(failed[0]), events
    assert "None" not in events and "None" not in text and "SIGKILL" not in text, text  # attempt 0's is not the job's
