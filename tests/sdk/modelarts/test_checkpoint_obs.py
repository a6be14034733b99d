"""A checkpoint folder on OBS (a ModelArts job's checkpoint output) lists as the same folder on disk does
(``modelarts/ckptlist.py`` over the shim's ``checkpoint_rows``), against moto's S3 server on 127.0.0.1 (issue 39)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

from malaunch.entrypoint.public import list_checkpoints
from malaunch.sdk.backends.modelarts.ckptlist import list_obs_checkpoints
from modelarts_env import BUCKET

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
