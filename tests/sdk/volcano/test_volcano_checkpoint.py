"""The checkpoint folder on Volcano (issue 39 item 1): ``checkpoint.volume`` is mounted on every pod and
``MALAUNCH_CHECKPOINT_DIR`` is the job's own folder on it, so a ``RestartJob`` of the same job finds what attempt 0
saved. The manifest passes the real CRD schema and the ``kubernetes`` models (the fake API server checks both at
create); a job with a ``checkpoint:`` section but no volume is refused in one line by ``--dry-run`` and submit; the
real shim, started twice with one pod's environment as Volcano starts a pod and then its replacement, resumes from
the checkpoint of its first start; and ``--resume-from`` maps onto the old job's folder on the same claim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml
from kubefake import FakeKube
from malaunch.sdk import ConfigError, Job, JobState, SpecError, spec_from_mapping
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from malaunch.sdk.backends.volcano.checkpoint import (
    MOUNT_PATH,
    UNRESOLVED,
    VOLUME_NAME,
    claim_of,
    resume_dir,
    resume_source,
)
from malaunch.sdk.backends.volcano.manifest import render_manifest
from malaunch.sdk.backends.volcano.template import load_template
from malaunch.sdk.spec.resume import ResumeRef
from sdkutil import ma_submit, wait_for
from shimutil import assert_nothing_left, free_port, marked_env, shim, write_v10_table
from volcano_checks import crd_errors, pod_template_errors

NAME = "ck-20261128-120000-abcdef"
WAIT = 120.0


def job_data(**checkpoint: Any) -> Dict[str, Any]:
    return {
        "name": "ck", "run_method": "torchrun", "code_dir": ".", "boot_file": "train.py",
        "image": "reg.example/malaunch:0.1.0", "backend": "volcano", "resources": {"hosts": 3, "devices_per_host": 1},
        "env": {"MALAUNCH_TEST_SCENARIO": "succeed"}, "volcano": {"namespace": "ml"},
        "checkpoint": {"keep": 3, **checkpoint},
    }  # fmt: skip


def manifest_for(data: Dict[str, Any], template: str | None = None) -> Dict[str, Any]:
    spec = spec_from_mapping(data)
    text, source = load_template(template)
    return render_manifest(spec, NAME, text, source)


def test_the_claim_is_mounted_on_every_pod_and_the_folder_is_the_jobs() -> None:
    manifest = manifest_for(job_data(volume="ckpt-pvc"))
    assert crd_errors(manifest) == []
    tasks = manifest["spec"]["tasks"]
    for task in tasks:
        pod = task["template"]["spec"]
        assert pod_template_errors(task["template"]) == []
        assert {"name": VOLUME_NAME, "persistentVolumeClaim": {"claimName": "ckpt-pvc"}} in pod["volumes"]
        for container in pod["containers"]:
            assert {"name": VOLUME_NAME, "mountPath": MOUNT_PATH} in container["volumeMounts"]
            env = {item["name"]: item.get("value") for item in container["env"]}
            assert env["MALAUNCH_CHECKPOINT_DIR"] == f"{MOUNT_PATH}/{NAME}"
            assert env["MALAUNCH_CHECKPOINT_KEEP"] == "3"
    assert sum(task["replicas"] for task in tasks) == 3  # one template for every host: host 0 to the last
    assert claim_of(manifest) == "ckpt-pvc"
    plain = manifest_for({**job_data(), "checkpoint": None})
    assert claim_of(plain) is None and "checkpoints" not in json.dumps(plain)


def test_an_adapted_template_that_drops_the_mount_is_refused(tmp_path: Path) -> None:
    text, _ = load_template(None)
    data = yaml.safe_load(text)
    container = data["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m != "{{checkpoint_volume_mount}}"]
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as caught:
        manifest_for(job_data(volume="ckpt-pvc"), str(mine))
    assert str(caught.value) == (
        f"{mine}: task 'worker' does not mount the checkpoint volume, got 'ckpt-pvc'; keep "
        "\"{{checkpoint_volume}}\" in the pod's volumes and \"{{checkpoint_volume_mount}}\" in the container's "
        "volumeMounts (as templates/volcano/job-template.yaml does)"
    )
    assert manifest_for({**job_data(), "checkpoint": None}, str(mine))  # without checkpoints it needs no mount


REFUSAL = ("checkpoint.volume: is required on the volcano backend (a pod's own disk does not "
           "survive a RestartJob); add checkpoint: {volume: <a PersistentVolumeClaim, ReadWriteMany for several "
           "hosts>}")  # fmt: skip


def test_checkpoints_without_a_volume_are_refused_in_one_line(
    kube: FakeKube, kubeconfig: Path, cli_env: Dict[str, str], tmp_path: Path
) -> None:
    with pytest.raises(SpecError, match=r"checkpoint\.volume: is required on the volcano backend"):
        manifest_for(job_data())
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(job_data()))
    (tmp_path / "train.py").write_text("print('hi')\n")
    env = {**cli_env, "KUBECONFIG": str(kubeconfig)}
    refusal = f"{job}: {REFUSAL}"  # the job file it came from, then the field
    for args in (["--dry-run"], ["--detach"], []):
        done = ma_submit([*args, str(job)], env)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", f"ma-submit: error: {refusal}\n"), args
    as_json = ma_submit(["--dry-run", "--output", "json", str(job)], env)
    assert as_json.returncode == 2 and json.loads(as_json.stdout) == {
        "error": refusal, "field": "checkpoint.volume", "exit_code": 2}
    assert kube.cluster.created == [] and kube.cluster.problems == []


def test_submitted_through_the_api_the_job_mounts_the_claim(kube: FakeKube, kubeconfig: Path) -> None:
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2)
    handle = backend.submit(spec_from_mapping(job_data(volume="ckpt-pvc")))
    assert handle.wait(timeout=WAIT, poll_interval=0.1).state is JobState.SUCCEEDED
    assert kube.cluster.problems == []  # the fake checked the CRD and every task's pod template at create
    (created,) = kube.cluster.created
    name = handle.id.split("/")[1]
    assert claim_of(created) == "ckpt-pvc"
    (container,) = created["spec"]["tasks"][0]["template"]["spec"]["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["MALAUNCH_CHECKPOINT_DIR"] == f"{MOUNT_PATH}/{name}"
    old = backend.api.get_job("ml", name)
    new = spec_from_mapping(job_data(volume="ckpt-pvc"))
    assert backend.resume_check(ResumeRef(name[:12]), new) == ResumeRef(handle.id)  # a prefix: the whole id
    assert resume_source(spec_from_mapping(job_data(volume="ckpt-pvc")), old, "step-00000004") == (
        f"{MOUNT_PATH}/{name}/step-00000004"
    )
    busy = {**job_data(volume="ckpt-pvc"), "env": {"MALAUNCH_TEST_SCENARIO": "run"}}
    running = backend.submit(spec_from_mapping(busy))
    wait_for(lambda: running.status().state is JobState.RUNNING, WAIT, "the second job running")
    with pytest.raises(ConfigError) as caught:
        backend.resume_check(ResumeRef(running.id), spec_from_mapping(job_data(volume="ckpt-pvc")))
    assert str(caught.value) == (f"--resume-from: job {running.id} is RUNNING; wait for it to "
                                 f"end, or stop it first: 'ma-submit stop {running.id}'")  # fmt: skip
    backend.stop(running.id)


def _env_of(manifest: Dict[str, Any]) -> Dict[str, Any]:
    (container,) = manifest["spec"]["tasks"][0]["template"]["spec"]["containers"]
    return {item["name"]: item.get("value") for item in container["env"]}


def test_resume_from_an_ended_job_on_the_same_claim_through_the_cli(
    kube: FakeKube, kubeconfig: Path, cli_env: Dict[str, str], tmp_path: Path
) -> None:
    """``--resume-from OLD:NAME`` on Volcano: dry-run and submit give the new job's pods the old job's folder on the
    same claim as ``MALAUNCH_RESUME_SOURCE``; a job on another claim is one line, exit 2, nothing created."""
    env = {**cli_env, "KUBECONFIG": str(kubeconfig)}
    backend = VolcanoBackend(kubeconfig=str(kubeconfig), environ={}, poll_interval=0.2)
    old = backend.submit(spec_from_mapping(job_data(volume="ckpt-pvc")))
    assert old.wait(timeout=WAIT, poll_interval=0.1).state is JobState.SUCCEEDED
    old_name = old.id.split("/")[1]
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(job_data(volume="ckpt-pvc")))
    (tmp_path / "train.py").write_text("print('hi')\n")
    asked = len(kube.cluster.requests)
    dry = ma_submit(["--dry-run", "--output", "json", "--resume-from", f"{old_name}:step-00000004", str(job)], env)
    assert dry.returncode == 0, dry.stderr
    assert len(kube.cluster.requests) == asked  # a dry run asks the cluster nothing: submit resolves the old job
    plan = json.loads(dry.stdout)
    manifest = plan["request"]["manifest"]
    assert crd_errors(manifest) == []
    assert _env_of(manifest)["MALAUNCH_RESUME_SOURCE"] == f"{MOUNT_PATH}/{old_name}/step-00000004"
    assert plan["spec"]["resume_from"] == f"{old_name}:step-00000004@{UNRESOLVED}"
    source = f"attempt 0 resumes from {MOUNT_PATH}/{old_name}/step-00000004"
    (note,) = [note for note in plan["notes"] if source in note]
    assert note.endswith(f"resume_from is not resolved in a dry run (no call to the cluster): submit checks that job "
                         f"{old_name} has ended and kept its checkpoints on volume ckpt-pvc, and names it by its "
                         "whole id"), note  # fmt: skip
    dry_plan = Job(spec_from_mapping(job_data(volume="ckpt-pvc")).replace(resume_from=old_name)).plan(
        backend=backend, dry=True)  # fmt: skip
    with pytest.raises(SpecError, match="resume_from: is a dry run's, not resolved"):
        backend.execute(dry_plan)  # such a plan is never created
    assert len(kube.cluster.requests) == asked
    resolved = Job(spec_from_mapping(job_data(volume="ckpt-pvc")).replace(resume_from=old_name)).plan(backend=backend)
    assert resolved.spec.resume_from == old.id  # submit's plan: the whole id, proven ended
    done = ma_submit(["--detach", "--resume-from", old.id, str(job)], env)
    assert done.returncode == 0, done.stderr
    created = kube.cluster.created[-1]
    assert _env_of(created)["MALAUNCH_RESUME_SOURCE"] == f"{MOUNT_PATH}/{old_name}"
    assert _env_of(created)["MALAUNCH_CHECKPOINT_DIR"] == f"{MOUNT_PATH}/{done.stdout.strip().split('/')[1]}"
    backend.stop(done.stdout.strip())
    job.write_text(yaml.safe_dump(job_data(volume="other-pvc")))
    count = len(kube.cluster.created)
    refused = ma_submit(["--resume-from", old.id, str(job)], env)
    assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", (
        f"ma-submit: error: --resume-from: job {old_name} kept its checkpoints on volume ckpt-pvc, this job mounts "
        "other-pvc; set checkpoint.volume: ckpt-pvc\n"))  # fmt: skip
    assert len(kube.cluster.created) == count


def test_resuming_from_another_job_needs_the_same_claim() -> None:
    old = manifest_for(job_data(volume="ckpt-pvc"))
    with pytest.raises(ConfigError) as other:
        resume_source(spec_from_mapping(job_data(volume="other-pvc")), old)
    assert str(other.value) == (f"--resume-from: job {NAME} kept its checkpoints on volume ckpt-pvc, this job mounts "
                                "other-pvc; set checkpoint.volume: ckpt-pvc")  # fmt: skip
    without = manifest_for({**job_data(), "checkpoint": None})
    with pytest.raises(ConfigError, match=f"job {NAME} kept no checkpoints on a volume"):
        resume_source(spec_from_mapping(job_data(volume="ckpt-pvc")), without)
    with pytest.raises(SpecError, match=r"checkpoint\.volume: is required"):
        resume_source(spec_from_mapping(job_data()), old)
    assert resume_dir(f"ml/{NAME}", "step-00000002") == resume_dir(NAME, "step-00000002") == (
        f"{MOUNT_PATH}/{NAME}/step-00000002"
    )
    with pytest.raises(SpecError, match="checkpoint: is required to resume from another job"):
        resume_source(spec_from_mapping({**job_data(), "checkpoint": None}), old)


SCRIPT = """\
import json, os, sys
from malaunch.entrypoint import checkpoint
out = sys.argv[1]
resume = os.environ.get("MALAUNCH_RESUME_FROM")
with open(os.path.join(out, "starts.jsonl"), "a") as handle:
    handle.write(json.dumps({"dir": os.environ["MALAUNCH_CHECKPOINT_DIR"], "resume": resume}) + "\\n")
if resume is None:
    with checkpoint.save(4) as folder:
        with open(os.path.join(folder, "model.txt"), "w") as handle:
            handle.write("weights at step 4")
    sys.exit(1)  # the pod fails: the PodFailed policy restarts the whole job (RestartJob)
with open(os.path.join(resume, "model.txt")) as handle:
    print("resumed:", handle.read())
"""


def _pod_env(manifest: Dict[str, Any], claim: Path, tmp_path: Path) -> Dict[str, str]:
    """Host 0's environment as the manifest gives it, the claim's mount point the folder ``claim``."""
    (container,) = manifest["spec"]["tasks"][0]["template"]["spec"]["containers"]
    pod_env = {item["name"]: item["value"].replace(MOUNT_PATH, str(claim)) for item in container["env"]
               if "value" in item and item["name"] != "MALAUNCH_TEST_SCENARIO"}  # fmt: skip
    write_v10_table(tmp_path / "table.json", servers=1, devices=1)
    pod_env.update(
        MA_CURRENT_HOST_IP="127.0.0.1", MA_CURRENT_INSTANCE_NAME=f"{NAME}-worker-0", VC_TASK_INDEX="0",
        MALAUNCH_JOB_SECRET="s" * 64, RANK_TABLE_FILE=str(tmp_path / "table.json"),
        MALAUNCH_MASTER_PORT=str(free_port()), MALAUNCH_LOG_DIR=str(tmp_path / "logs"),
    )  # fmt: skip
    return pod_env


@pytest.mark.process
def test_the_real_shim_finds_attempt_0s_checkpoint_after_a_restartjob(tmp_path: Path) -> None:
    """The pod's environment as the manifest gives it (the claim's mount point a folder here), run twice: the pod of
    attempt 0, then the pod Volcano makes after RestartJob (a new process, nothing kept but the volume)."""
    data = {**job_data(volume="ckpt-pvc"), "run_method": "ranktable", "resources": {"hosts": 1, "devices_per_host": 1}}
    claim = tmp_path / "claim"
    pod_env = _pod_env(manifest_for(data), claim, tmp_path)
    script, out = tmp_path / "train.py", tmp_path / "out"
    script.write_text(SCRIPT)
    out.mkdir()
    env = marked_env(pod_env)
    first = shim([str(script), str(out)], env, tmp_path)
    assert first.returncode == 1, first.stderr[-3000:]
    env["MALAUNCH_MASTER_PORT"] = str(free_port())
    second = shim([str(script), str(out)], env, tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])
    folder = claim / NAME
    starts = [json.loads(line) for line in (out / "starts.jsonl").read_text().splitlines()]
    assert starts == [{"dir": str(folder), "resume": None},
                      {"dir": str(folder), "resume": str(folder / "step-00000004")}]  # fmt: skip
    assert "resumed: weights at step 4" in second.stdout + second.stderr
    assert f"attempt 0 resumes from {folder / 'step-00000004'} (step 4" in second.stderr
    assert (folder / "step-00000004" / ".complete").is_file()


@pytest.mark.process
def test_the_real_shim_of_a_new_job_resumes_from_the_old_jobs_folder_on_the_claim(tmp_path: Path) -> None:
    """``--resume-from`` on Volcano end to end in the pod: the old job's pod saves step 4 on the claim and fails; the
    new job's manifest (its resume_from resolved to the old job's whole id) gives its pod MALAUNCH_RESUME_SOURCE on
    the same mount, and the real shim starts attempt 0 from that checkpoint while saving into its own folder."""
    data = {**job_data(volume="ckpt-pvc"), "run_method": "ranktable", "resources": {"hosts": 1, "devices_per_host": 1}}
    claim, out = tmp_path / "claim", tmp_path / "out"
    out.mkdir()
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    old_env = marked_env(_pod_env(manifest_for(data), claim, tmp_path))
    first = shim([str(script), str(out)], old_env, tmp_path)
    assert first.returncode == 1, first.stderr[-3000:]
    new_name = "ck-20261128-130000-fedcba"
    new_manifest = render_manifest(spec_from_mapping({**data, "resume_from": f"ml/{NAME}"}), new_name,
                                   *load_template(None))  # fmt: skip
    new_env = {**old_env, **_pod_env(new_manifest, claim, tmp_path)}  # the same test mark: nothing may outlive it
    assert new_env["MALAUNCH_RESUME_SOURCE"] == str(claim / NAME)
    second = shim([str(script), str(out)], new_env, tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert_nothing_left(old_env["MALAUNCH_TEST_MARK"])
    starts = [json.loads(line) for line in (out / "starts.jsonl").read_text().splitlines()]
    assert starts == [{"dir": str(claim / NAME), "resume": None},
                      {"dir": str(claim / new_name), "resume": str(claim / NAME / "step-00000004")}]  # fmt: skip
    assert "resumed: weights at step 4" in second.stdout + second.stderr
    assert f"attempt 0 resumes from another job's checkpoint {claim / NAME / 'step-00000004'} (step 4" in second.stderr


def test_the_mount_is_in_the_packaged_template_and_the_repos_copy() -> None:
    repo = Path(__file__).resolve().parents[3]
    packaged, _ = load_template(None)
    assert (repo / "templates" / "volcano" / "job-template.yaml").read_text() == packaged
    for placeholder in ("{{checkpoint_volume}}", "{{checkpoint_volume_mount}}"):
        assert f'"{placeholder}"' in packaged
