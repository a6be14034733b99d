"""A job's checkpoints listed (``ma-submit checkpoints``) and reused by a new job (``--resume-from``), through the
local backend with real runners, shims and torchrun with gloo (issue 39, item 3).

Job A trains the deterministic model of ``ckpt_train.py`` for 12 steps uninterrupted (a checkpoint every 3, all
four kept): its weights are the reference. Its checkpoints after step 6 are then taken away (step 9 left as a save
that did not finish), so that A reads as a job whose newest complete checkpoint is step 6. A new job of 12 steps
started from A's newest checkpoint, and one from A's older ``step-00000003``, each end with weights equal, byte for
byte, to A's, and train only the steps after their start.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
import yaml
from malaunch.sdk import Job
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.sweep import Sweep
from sdkutil import assert_nothing_running, job_ids, ma_submit, wait_for, write_job

SCRIPTS = Path(__file__).resolve().parents[2] / "entrypoint" / "scripts"
EVERY = 3


def _job_file(tmp_path: Path, total: int, tag: str, keep: int = 3) -> Tuple[Path, Path]:
    out = tmp_path / f"out-{tag}"
    out.mkdir()
    job = tmp_path / f"job-{tag}.yaml"
    job.write_text(yaml.safe_dump({
        "name": tag, "run_method": "torchrun", "code_dir": str(SCRIPTS), "boot_file": "ckpt_train.py",
        "args": [str(out), str(total), str(EVERY), "none"], "resources": {"hosts": 1, "devices_per_host": 2},
        "env": {"OMP_NUM_THREADS": "1"}, "checkpoint": {"keep": keep},
    }))  # fmt: skip
    return job, out


def _run(tmp_path: Path, cli_env: Dict[str, str], home: Path, total: int, tag: str,
         resume: Optional[str] = None, keep: int = 3) -> Tuple[str, Dict[str, str], List[int], str]:  # fmt: skip
    """Run a job to its end: its id, final weights, the steps rank 0 trained, and its console."""
    job, out = _job_file(tmp_path, total, tag, keep)
    before = set(job_ids(home))
    done = ma_submit([*(["--resume-from", resume] if resume else []), str(job)], cli_env, timeout=600)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    (job_id,) = set(job_ids(home)) - before
    assert_nothing_running(job_id)
    trained = [json.loads(line)["step"] for line in (out / "trained-0.jsonl").read_text().splitlines()]
    return job_id, json.loads((out / "final.json").read_text()), trained, done.stdout + done.stderr


def _refused(args: List[str], cli_env: Dict[str, str], code: int = 2) -> str:
    done = ma_submit(args, cli_env)
    assert done.returncode == code, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ma-submit: error: "), done.stderr
    assert "Traceback" not in done.stdout
    return lines[0]


@pytest.mark.process
@pytest.mark.torch
@pytest.mark.usefixtures("cleanup_jobs")
def test_checkpoints_are_listed_and_a_new_job_resumes_from_them_bit_for_bit(tmp_path: Path, cli_env: Dict[str, str],
                                                                            home: Path) -> None:  # fmt: skip
    # one uninterrupted run of 12 steps: the reference, and the job the others start from once its checkpoints
    # after step 6 are gone (step 9 as a save that did not finish, below)
    first, reference, trained, _ = _run(tmp_path, cli_env, home, 12, "first", keep=4)
    assert trained == list(range(1, 13))
    folder = home / "jobs" / first / "checkpoints"
    saved = sorted(path.name for path in folder.iterdir() if path.name.startswith("step-"))
    assert saved == ["step-00000003", "step-00000006", "step-00000009", "step-00000012"], saved
    for later in ("step-00000009", "step-00000012"):
        shutil.rmtree(folder / later)
    unfinished = folder / "step-00000009"
    (unfinished / ".parts").mkdir(parents=True)
    (unfinished / ".parts" / "rank-0").write_text(json.dumps({"step": 9, "attempt": "0.0", "rank": 0}))
    damaged = folder / "step-00000010"
    damaged.mkdir()
    (damaged / ".complete").write_text("half a marker")

    listed = ma_submit(["checkpoints", "first"], cli_env)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows[0] == ["NAME", "STEP", "AGE", "SIZE", "STATE"]
    assert [(row[0], row[1]) for row in rows[1:]] == [
        ("step-00000010", "-"), ("step-00000003", "3"), ("step-00000006", "6"), ("step-00000009", "9")]  # fmt: skip
    text = listed.stdout
    assert "damaged marker: its .complete is damaged (not JSON: 'half a marker')" in text
    assert "no marker: it has no .complete (a save that did not finish)" in text
    assert listed.stderr == f"ma-submit: job {first}: checkpoints in {folder}\n"
    shown = json.loads(ma_submit(["checkpoints", first, "--output", "json"], cli_env).stdout)
    assert shown["id"] == first and shown["folder"] == str(folder) and shown["running"] is False
    states = {item["name"]: (item["step"], item["complete"], item["state"]) for item in shown["checkpoints"]}
    assert states == {
        "step-00000003": (3, True, "complete"), "step-00000006": (6, True, "complete"),
        "step-00000009": (9, False, "no marker"), "step-00000010": (None, False, "damaged marker")}  # fmt: skip
    assert all(item["size"] > 100 for item in shown["checkpoints"] if item["complete"])

    job, _ = _job_file(tmp_path, 12, "dry")
    dry = ma_submit(["--resume-from", "first", str(job), "--dry-run"], cli_env)
    assert dry.returncode == 0 and f"MALAUNCH_RESUME_SOURCE={folder}\n" in dry.stdout, dry.stdout + dry.stderr

    _, final, trained, console = _run(tmp_path, cli_env, home, 12, "newest", resume="first")
    assert final == reference and trained == list(range(7, 13))
    assert f"attempt 0 resumes from another job's checkpoint {folder / 'step-00000006'} (step 6;" in console
    _, final, trained, _ = _run(tmp_path, cli_env, home, 12, "named", resume=f"{first}:step-00000003")
    assert final == reference and trained == list(range(4, 13))

    line = _refused(["--resume-from", f"{first}:step-00000009", str(job)], cli_env)
    assert f"{unfinished} is not complete: it has no .complete" in line and "ma-submit checkpoints" in line
    line = _refused(["--resume-from", f"{first}:step-00000010", str(job)], cli_env)
    assert f"{damaged} is not complete: its .complete is damaged" in line
    line = _refused(["--resume-from", "nosuchjob", str(job)], cli_env, code=4)
    assert "no job with id 'nosuchjob'" in line


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_running_job_and_one_with_no_complete_checkpoint_are_refused(tmp_path: Path, cli_env: Dict[str, str],
                                                                       home: Path) -> None:  # fmt: skip
    go = tmp_path / "go"
    job = write_job(tmp_path / "waiting", f"""
        import os, time
        while not os.path.exists({str(go)!r}):
            time.sleep(0.05)
        """, name="waits", checkpoint={"keep": 2})  # fmt: skip
    started = ma_submit(["--detach", str(job)], cli_env)
    assert started.returncode == 0, started.stderr
    waiting = started.stdout.strip()
    backend = LocalBackend(home=str(home))
    wait_for(lambda: backend.status(waiting).state.value == "RUNNING", what="the job to run")
    listed = ma_submit(["checkpoints", waiting], cli_env)
    assert listed.returncode == 0 and listed.stdout == ""
    folder = home / "jobs" / waiting / "checkpoints"
    assert listed.stderr == f"ma-submit: job {waiting} saved no checkpoint in {folder} yet\n"
    line = _refused(["--resume-from", waiting, str(job)], cli_env)
    assert f"job {waiting} is RUNNING: a job starts from an ended job's checkpoint" in line
    assert f"'ma-submit wait {waiting}'" in line
    go.touch()
    assert ma_submit(["wait", waiting], cli_env).returncode == 0
    line = _refused(["--resume-from", waiting, str(job)], cli_env)
    assert f"{folder} holds no checkpoint" in line


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_the_python_api_lists_the_checkpoints_and_plans_the_source(tmp_path: Path, home: Path) -> None:
    job = write_job(tmp_path / "saver", """
        from malaunch.entrypoint import checkpoint
        with checkpoint.save(1):
            pass
        """, name="saver", checkpoint={})  # fmt: skip
    backend = LocalBackend(home=str(home))
    handle = Job.from_yaml(str(job)).submit(backend)
    assert handle.wait(timeout=120).exit_code == 0
    listing = handle.checkpoints()
    assert [(row.name, row.step, row.complete) for row in listing.rows] == [("step-00000001", 1, True)]
    source = home / "jobs" / handle.id / "checkpoints" / "step-00000001"
    plan = Job.from_yaml(str(job), resume_from=f"{handle.id[:10]}:step-00000001").plan(backend=backend)
    assert f"MALAUNCH_RESUME_SOURCE={source}" in plan.render()
    elsewhere = Job.from_yaml(str(job), resume_from=f"{handle.id}@obs://bucket/x/").plan(backend=backend)
    assert elsewhere.spec.resume_from == handle.id  # a location is the check's to find; local needs none
    assert Job.from_yaml(str(job), resume_from="old-2026").spec.to_dict()["resume_from"] == "old-2026"
    trial_job = Job.from_yaml(str(job), resume_from=handle.id[:10], args=["--lr={lr}"])
    sweep = Sweep(trial_job, params={"lr": [1, 2]})
    trials = sweep.plan(backend=backend).plans
    assert len(trials) == 2 and all(f"MALAUNCH_RESUME_SOURCE={source.parent}\n" in plan.render() for plan in trials)


@pytest.mark.parametrize("fields, field, problem", [
    ({"resume_from": "job-1"}, "resume_from", "needs a checkpoint: section"),
    ({"resume_from": "job-1:", "checkpoint": {}}, "resume_from", "must name one checkpoint after ':'"),
    ({"resume_from": "job-1:../x", "checkpoint": {}}, "resume_from", "must name one checkpoint after ':'"),
    ({"resume_from": ":step-1", "checkpoint": {}}, "resume_from", "must start with a job id"),
    ({"resume_from": 3, "checkpoint": {}}, "resume_from", "must be a string"),
    ({"resume_from": "job-1@obs://b/a b/", "checkpoint": {}}, "resume_from", "as a URL without spaces after '@'"),
])  # fmt: skip
def test_a_bad_resume_from_is_refused_by_the_spec(tmp_path: Path, fields: Dict[str, object], field: str,
                                                  problem: str) -> None:  # fmt: skip
    from malaunch.sdk.errors import SpecError

    with pytest.raises(SpecError) as caught:
        Job(name="j", code_dir=str(tmp_path), boot_file="b.py", **fields)
    assert caught.value.field == field and problem in caught.value.problem


def test_cloud_backends_refuse_resume_from_in_one_line(tmp_path: Path, cli_env: Dict[str, str],
                                                       kubeconfig: Path) -> None:  # fmt: skip
    job = write_job(tmp_path / "cloud", "print(1)\n", name="cloud", checkpoint={}, backend="volcano",
                    image="python:3.11")  # fmt: skip
    line = _refused(["--resume-from", "ns/old", str(job), "--dry-run"], cli_env)
    assert "checkpoint.volume: is required on the volcano backend" in line  # before the cluster is asked
    line = _refused(["checkpoints", "--backend", "volcano", "ns/old"], {**cli_env, "KUBECONFIG": str(kubeconfig)})
    assert "on the cluster's volume, which this machine cannot read" in line and "ma-submit exec ns/old" in line
