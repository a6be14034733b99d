"""A checkpoint folder on OBS (a ModelArts job's checkpoint output) lists as the same folder on disk does
(``modelarts/ckptlist.py`` over the shim's ``checkpoint_rows``), against moto's S3 server on 127.0.0.1 (issue 39)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from fake_modelarts import FakeModelArts
from malaunch.entrypoint.public import list_checkpoints
from malaunch.sdk import JobState, spec_from_mapping
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.backends.modelarts.ckptlist import list_obs_checkpoints
from modelarts_env import BUCKET
from sdkutil import ma_submit

#: One checkpoint folder: two complete checkpoints, one unfinished save, one damaged marker, the ranks' progress.
_TREE: Dict[str, bytes] = {
    "step-00000003/rank-0.pt": b"x" * 700,
    "step-00000003/.complete": json.dumps({"step": 3, "time": 100.0, "ranks": 1}).encode(),
    "step-00000006/rank-0.pt": b"y" * 900,
    "step-00000006/sub/rank-1.pt": b"z" * 50,
    "step-00000006/.complete": json.dumps({"step": 6, "time": 200.0, "ranks": 2}).encode(),
    "step-00000009/rank-0.pt": b"half",
    "step-00000009/.parts/rank-0": json.dumps({"step": 9, "attempt": "0.0", "rank": 0}).encode(),
    "step-00000010/.complete": b"half a marker",
    ".progress/rank-0.json": json.dumps({"step": 10}).encode(),
}


def _shown(rows: Any) -> List[Tuple[Any, ...]]:
    return [(row.name, row.step, row.size, row.state, row.why) for row in rows]


def test_an_obs_folder_lists_as_the_same_folder_on_disk(s3: Any, tmp_path: Path) -> None:
    for key, data in _TREE.items():
        s3.put_object(Bucket=BUCKET, Key=f"jobs/j1/checkpoints/{key}", Body=data)
        path = tmp_path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    s3.put_object(Bucket=BUCKET, Key="jobs/j1/checkpoints-other/step-1/.complete", Body=b'{"step": 1}')
    rows = list_obs_checkpoints(s3, f"obs://{BUCKET}/jobs/j1/checkpoints/")
    assert _shown(rows) == _shown(list_checkpoints(str(tmp_path)))
    assert [(row.name, row.state) for row in rows] == [
        ("step-00000010", "damaged marker"), ("step-00000003", "complete"), ("step-00000006", "complete"),
        ("step-00000009", "no marker")]  # fmt: skip
    assert rows[2].path == f"obs://{BUCKET}/jobs/j1/checkpoints/step-00000006" and rows[2].time == 200.0
    assert rows[2].size == 900 + 50 + len(_TREE["step-00000006/.complete"])
    running = list_obs_checkpoints(s3, f"obs://{BUCKET}/jobs/j1/checkpoints", running=True)
    assert running[-1].state == "being written" and running[-1].why.endswith("its save may still be under way")
    assert list_obs_checkpoints(s3, f"obs://{BUCKET}/jobs/none/") == ()


def _node(s3: Any, prefix: str, node: int, step: int, ranks: int = 4) -> None:
    """Node ``node`` (two ranks each, every node its own folder) uploads its save of ``step``: its ranks' files and
    parts, and the ``.complete`` its shim wrote once the coordinator said every part was held somewhere."""
    for rank in (2 * node, 2 * node + 1):
        part = {"step": step, "attempt": "0.0", "rank": rank, "ranks": ranks}
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}step-{step:08d}/rank-{rank}.pt", Body=b"w" * 10)
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}step-{step:08d}/.parts/rank-{rank}", Body=json.dumps(part))
    marker = {"step": step, "time": 1000.0 + step + node, "ranks": ranks}
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}step-{step:08d}/.complete", Body=json.dumps(marker))


def test_a_marker_on_obs_counts_only_once_every_nodes_parts_arrived(s3: Any, tmp_path: Path) -> None:
    """Each ModelArts node uploads its own folder: node 0's ``.complete`` of step 6 can be in OBS before node 1's
    files are. The listing says so, and a new job resuming from the folder (the shim's resume_point on what the
    platform downloads) takes step 3, not step 6."""
    from malaunch.entrypoint.public import resume_point

    prefix = "jobs/j2/checkpoints/"
    for node in (0, 1):
        _node(s3, prefix, node, 3)
    _node(s3, prefix, 0, 6)  # node 1's upload of step 6 has not come yet
    rows = list_obs_checkpoints(s3, f"obs://{BUCKET}/{prefix}")
    assert [(row.name, row.step, row.state) for row in rows] == [
        ("step-00000003", 3, "complete"), ("step-00000006", 6, "parts missing")]  # fmt: skip
    assert rows[1].why == ("the parts of rank(s) 2, 3 of its 4 are not there though its .complete is (another "
                           "host's upload may not have arrived yet)")  # fmt: skip
    assert list_obs_checkpoints(s3, f"obs://{BUCKET}/{prefix}", running=True)[1].state == "parts missing"
    for item in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]:  # what a new job downloads
        path = tmp_path / item["Key"][len(prefix) :]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read())
    assert resume_point(str(tmp_path)).name == "step-00000003"  # type: ignore[union-attr]
    assert resume_point(str(tmp_path / "step-00000006")) == (
        f"checkpoint {tmp_path / 'step-00000006'} is not complete: the parts of rank(s) 2, 3 of its 4 are not there "
        "though its .complete is (another host's upload may not have arrived yet)")  # fmt: skip
    _node(s3, prefix, 1, 6)  # node 1's upload arrived
    rows = list_obs_checkpoints(s3, f"obs://{BUCKET}/{prefix}")
    assert [(row.name, row.state) for row in rows] == [("step-00000003", "complete"), ("step-00000006", "complete")]


@pytest.mark.process
def test_ma_submit_checkpoints_lists_a_modelarts_jobs_obs_folder(
    fake_ma: FakeModelArts, ma_env: Dict[str, str], s3: Any
) -> None:
    """``ma-submit checkpoints JOB_ID`` of a ModelArts job: the folder its details name, read with the backend's own
    OBS client (moto's server here), in text and ``--output json``; a job without checkpoints says so in one note."""
    fake_ma.run_seconds = 0.2
    backend = ModelArtsBackend(environ=ma_env, status_interval=0.0, poll=0.1, progress=None)
    data = {"name": "ck", "backend": "modelarts", "run_method": "torchrun", "code_dir": f"obs://{BUCKET}/code/",
            "boot_file": "train.py", "image": "swr.example/team/malaunch:1",
            "resources": {"hosts": 1, "flavor": "modelarts.vm.cpu.8u"},
            "modelarts": {"obs_dir": f"obs://{BUCKET}/jobs/"}, "checkpoint": {}}  # fmt: skip
    job = backend.submit(spec_from_mapping(data))
    assert job.wait(timeout=120.0, poll_interval=0.1).state is JobState.SUCCEEDED
    url = f"obs://{BUCKET}/jobs/{job.id}/checkpoints/"
    for key, value in _TREE.items():
        s3.put_object(Bucket=BUCKET, Key=f"jobs/{job.id}/checkpoints/{key}", Body=value)
    listing = backend.checkpoints(job.id)
    assert (listing.where, listing.running, listing.note) == (url, False, "")
    assert _shown(listing.rows) == _shown(list_obs_checkpoints(s3, url))
    as_json = ma_submit(["checkpoints", "--output", "json", job.id], ma_env)
    assert as_json.returncode == 0, as_json.stderr
    shown = json.loads(as_json.stdout)
    assert (shown["id"], shown["folder"], shown["running"]) == (job.id, url, False)
    assert [(row["name"], row["step"], row["complete"]) for row in shown["checkpoints"]] == [
        ("step-00000010", None, False), ("step-00000003", 3, True), ("step-00000006", 6, True),
        ("step-00000009", 9, False)]  # fmt: skip
    text = ma_submit(["checkpoints", job.id], ma_env)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["NAME", "STEP", "AGE", "SIZE", "STATE"] and len(lines) == 5
    assert lines[2].startswith("step-00000003") and lines[2].endswith("complete")
    assert text.stderr == f"ma-submit: job {job.id}: checkpoints in {url}\n"
    plain = backend.submit(spec_from_mapping({**data, "checkpoint": None}))
    plain.wait(timeout=120.0, poll_interval=0.1)
    none = ma_submit(["checkpoints", plain.id], ma_env)
    assert (none.returncode, none.stdout) == (0, "")
    assert none.stderr.startswith(f"ma-submit: job {plain.id} has no checkpoint folder: its job file has no ")
    lost = backend.submit(spec_from_mapping({**data, "checkpoint": {"obs_path": "obs://no-such-bucket/ckpt/"}}))
    lost.wait(timeout=120.0, poll_interval=0.1)
    failed = ma_submit(["checkpoints", lost.id], ma_env)
    assert failed.returncode == 3 and failed.stdout == "" and "Traceback" not in failed.stderr
    assert failed.stderr.splitlines() == [
        "ma-submit: error: the OBS bucket 'no-such-bucket' does not exist (needed for obs://no-such-bucket/ckpt/); "
        "create it in the OBS console or set modelarts.obs_dir to a bucket you own"]  # fmt: skip
    assert fake_ma.body_errors == [] and fake_ma.signature_failures == []
