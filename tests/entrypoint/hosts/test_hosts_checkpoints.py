"""Issue 39's last gap: a save completes through the coordinator when each host's checkpoint folder is its own.

Two shims started as pods start them (``hostsutil``), each with a checkpoint folder of its own (ModelArts gives
every node its own output channel), run ``ckpt_train.py`` under torchrun (one rank per host, gloo on CPU): every
rank saves with ``malaunch.entrypoint.checkpoint.save``, so no folder ever holds every rank's part; each host's
shim tells the coordinator the parts it holds, and writes ``.complete`` once the hosts together hold them all.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from hostsutil import Hosts
from shimutil import free_port

pytestmark = [pytest.mark.process, pytest.mark.torch]

TOTAL, EVERY = 12, 3


def _run(made: List[Hosts], tmp: Path, fault: str) -> Tuple[Hosts, Dict[str, str], List[int]]:
    """Run the training on two hosts; the job, rank 0's final weights and every step rank 0 trained."""
    out = tmp / "out"
    out.mkdir()
    env = {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "1", "MA_TORCHRUN_MASTER_PORT": str(free_port()),
           "MA_MAX_RESTARTS": "2", "MALAUNCH_RESTART_ON": "always", "MALAUNCH_GRACE_PERIOD": "5",
           "MALAUNCH_CHECKPOINT_KEEP": "2"}  # fmt: skip
    folders = {index: {"MALAUNCH_CHECKPOINT_DIR": str(tmp / f"ckpt-h{index}")} for index in (0, 1)}
    job = Hosts(tmp, 2, env, script="ckpt_train.py", args=(str(out), str(TOTAL), str(EVERY), fault),
                per_host=folders)  # fmt: skip
    made.append(job)
    job.start_all()
    codes = [job.wait(0, timeout=300), job.wait(1, timeout=300)]
    assert codes == [0, 0], job.console(0)[-3000:] + job.console(1)[-3000:]
    trained = [json.loads(line)["step"] for line in (out / "trained-0.jsonl").read_text().splitlines()]
    final: Dict[str, str] = json.loads((out / "final.json").read_text())
    return job, final, trained


def _marker(folder: Path) -> Dict[str, int]:
    value: Dict[str, int] = json.loads((folder / ".complete").read_text())
    return value


def _parts(folder: Path) -> List[str]:
    return sorted(path.name for path in (folder / ".parts").iterdir())


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """The weights of a run without a failure; every save completes in both hosts' folders."""
    made: List[Hosts] = []
    tmp = tmp_path_factory.mktemp("clean")
    try:
        job, final, trained = _run(made, tmp, "none")
    finally:
        for each in made:
            each.close()
    assert trained == list(range(1, TOTAL + 1))
    for host in (0, 1):
        folder = tmp / f"ckpt-h{host}" / "step-00000012"
        assert (_marker(folder)["step"], _marker(folder)["ranks"]) == (12, 2)
        assert _parts(folder) == [f"rank-{host}"]  # its own rank's part alone: no rank could complete it
        assert f"checkpoint {folder} complete: every host holds its ranks' parts of step 12 (2 ranks)" in \
            job.console(host)  # fmt: skip
    assert (tmp / "ckpt-h1" / "step-00000003" / ".complete").is_file()  # host 1 keeps what it saved
    return final


def test_a_rank_killed_mid_run_resumes_from_the_newest_complete_one_on_both_hosts(
    hosts: List[Hosts], tmp_path: Path, reference: Dict[str, str]
) -> None:
    job, final, trained = _run(hosts, tmp_path, "run:1:8")
    assert final == reference
    assert 0 < sum(count - 1 for count in Counter(trained).values()) <= EVERY
    for host in (0, 1):
        resumed = tmp_path / f"ckpt-h{host}" / "step-00000006"
        assert f"attempt 1 resumes from {resumed} (step 6" in job.console(host)
        assert _marker(resumed)["ranks"] == 2


def test_a_rank_killed_in_a_save_leaves_it_incomplete_on_both_hosts(
    hosts: List[Hosts], tmp_path: Path, reference: Dict[str, str]
) -> None:
    job, final, trained = _run(hosts, tmp_path, "save:1:9")
    assert final == reference
    assert 0 < sum(count - 1 for count in Counter(trained).values()) <= EVERY
    for host in (0, 1):
        ckpt = tmp_path / f"ckpt-h{host}"
        half = ckpt / "step-00000009"
        console = job.console(host)
        # step 9 was not complete on this host when attempt 1 chose where to resume: it resumed from step 6
        assert f"attempt 1 resumes from {ckpt / 'step-00000006'} (step 6; the ranks had reached step 9" in console
        completed = f"checkpoint {half} complete: every host holds its ranks' parts of step 9 (2 ranks)"
        assert console.index("attempt 1 of at most 3") < console.index(completed)  # saved again in attempt 1
        assert (_marker(half)["step"], _marker(half)["ranks"]) == (9, 2)
        parts = [json.loads((half / ".parts" / name).read_text()) for name in _parts(half)]
        assert [part["attempt"] for part in parts] == ["1.0"]  # attempt 0's part (host 0's) was replaced
    # host 0 held rank 0's part of attempt 0's save of step 9 (its folder says how far it got), host 1 none
    half = tmp_path / "ckpt-h0" / "step-00000009"
    assert f"checkpoint {half} passed over: it has no .complete (a save that did not finish); resuming from " \
           "step-00000006 (step 6)" in job.console(0)  # fmt: skip
