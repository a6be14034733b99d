"""History and retention of the local backend with real jobs: ``list`` pages and filters from the history index
(and rebuilds it when damaged), ``prune --dry-run/--state/--keep`` never touches a running job nor one being
read, two prunes at once, ``keep_for`` applied by the next command, and ``keep_for`` on Volcano."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from malaunch.sdk import JobState, JobStatus, SpecError, spec_from_mapping
from malaunch.sdk.backends.listing import ListQuery, page_of
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.backends.local.history import HISTORY_FILE, History, HistoryRow
from malaunch.sdk.backends.local.jobdir import JobPaths
from malaunch.sdk.backends.local.retention import reading
from malaunch.sdk.backends.local.state import read_state
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.backends.volcano.manifest import render_manifest
from malaunch.sdk.backends.volcano.template import load_template
from sdkutil import copy_job, job_ids, ma_submit, wait_for, write_job
from volcano_checks import crd_errors

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("cleanup_jobs")]

QUICK = "print('done', flush=True)\n"
SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(600)\n"


def _ended_job(tmp_path: Path, env: Dict[str, str], home: Path, **fields: Any) -> str:
    job = write_job(tmp_path / "quick", QUICK, name="quick", **fields)
    result = ma_submit([str(job)], env)
    assert result.returncode == 0, result.stderr
    (job_id,) = job_ids(home)
    return job_id


def _copies(home: Path, job_id: str, count: int, prefix: str = "copy", **changes: Any) -> List[str]:
    state = read_state(str(home / "jobs" / job_id / "state.json")).data
    assert state is not None
    made = []
    for index in range(count):
        new_id = f"{prefix}-{index:04d}"
        age = 60.0 * (index + 1)
        copy_job(home, job_id, new_id, created_at=state["created_at"] - age, ended_at=state["ended_at"] - age,
                 **changes)  # fmt: skip
        made.append(new_id)
    return made


def _history_ids(home: Path) -> List[str]:
    """The ids of the history's rows, in file order (newest first)."""
    lines = (home / HISTORY_FILE).read_text().splitlines()
    assert json.loads(lines[0])["version"] == 2
    return [line.split("\t", 1)[0] for line in lines[1:]]


def _listed(result: subprocess.CompletedProcess[str]) -> List[str]:
    assert result.returncode == 0, result.stderr
    return [line.split()[0] for line in result.stdout.splitlines()[1:]]


def test_list_pages_newest_first_and_filters(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    job_id = _ended_job(tmp_path, cli_env, home)
    older = _copies(home, job_id, 30)
    failed = _copies(home, job_id, 3, prefix="bad", state="FAILED", exit_code=3, name="other")
    shown = ma_submit(["list"], cli_env)
    assert _listed(shown)[:3] == [job_id, "copy-0000", "bad-0000"]
    assert len(_listed(shown)) == 20
    assert shown.stderr.splitlines() == ["ma-submit: 14 more job(s) not shown; --limit N shows more, --limit 0 all"]
    everything = ma_submit(["list", "--limit", "0"], cli_env)
    assert len(_listed(everything)) == 34 and everything.stderr == ""
    assert _listed(ma_submit(["list", "--state", "failed"], cli_env)) == failed
    assert _listed(ma_submit(["list", "--state", "FAILED", "--state", "succeeded", "--limit", "0"], cli_env)) == (
        _listed(everything)
    )
    assert _listed(ma_submit(["list", "--name", "oth*"], cli_env)) == failed
    assert _listed(ma_submit(["list", "--since", "150s", "--name", "quick"], cli_env)) == [job_id, *older[:2]]
    old = _listed(ma_submit(["list", "--older-than", "29m", "--limit", "0"], cli_env))
    assert old == older[-2:]
    data = json.loads(ma_submit(["list", "--output", "json", "--limit", "2"], cli_env).stdout)
    assert [row["id"] for row in data] == [job_id, "copy-0000"]
    assert set(data[0]) == {"id", "state", "exit_code", "name", "message", "created_at", "started_at", "ended_at"}


def test_list_answers_from_the_history_not_from_every_job(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job_id = _ended_job(tmp_path, cli_env, home)
    _copies(home, job_id, 3)
    assert len(_listed(ma_submit(["list"], cli_env))) == 4
    assert _history_ids(home) == [job_id, "copy-0000", "copy-0001", "copy-0002"]
    (home / "jobs" / "copy-0001" / "state.json").write_text("{not json")  # an ended job is not read again
    listed = ma_submit(["list"], cli_env)
    assert "copy-0001" in _listed(listed) and listed.stderr == ""
    shutil.rmtree(home / "jobs" / "copy-0002")  # a folder removed by hand drops its row
    assert "copy-0002" not in _listed(ma_submit(["list"], cli_env))
    assert "copy-0002" not in (home / HISTORY_FILE).read_text()
    assert "SUCCEEDED" in ma_submit(["status", job_id], cli_env).stdout


def test_list_from_python_answers_from_the_history_too(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    """``LocalBackend.list()`` read every job's folder; it reads the index as the CLI does."""
    job_id = _ended_job(tmp_path, cli_env, home)
    _copies(home, job_id, 2)
    backend = LocalBackend(home=str(home))
    assert [s.id for s in backend.list()] == [job_id, "copy-0000", "copy-0001"]
    assert _history_ids(home) == [job_id, "copy-0000", "copy-0001"]
    (home / "jobs" / "copy-0000" / "state.json").write_text("{not json")  # an ended job is not read again
    listed = {s.id: s for s in backend.list()}
    assert listed["copy-0000"].state is JobState.SUCCEEDED, listed["copy-0000"]
    shutil.rmtree(home / "jobs" / "copy-0001")  # a folder removed by hand drops its row
    assert [s.id for s in backend.list()] == [job_id, "copy-0000"]


def test_a_damaged_history_is_rebuilt_with_one_line(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    job_id = _ended_job(tmp_path, cli_env, home)
    _copies(home, job_id, 2)
    ma_submit(["list"], cli_env)
    for damage in ("{\"version\": 1, \"jobs\": [", "\x00\x01binary", json.dumps({"version": 1, "jobs": [["x"]]})):
        (home / HISTORY_FILE).write_text(damage)
        listed = ma_submit(["list"], cli_env)
        assert len(_listed(listed)) == 3
        (line,) = listed.stderr.splitlines()
        assert line.startswith(f"ma-submit: the job history {home / HISTORY_FILE} ") and "rebuilt it" in line
        assert "Traceback" not in listed.stderr
        again = ma_submit(["list"], cli_env)
        assert again.stderr == "" and _listed(again) == _listed(listed)


def test_writers_at_the_same_time_lose_nothing(home: Path) -> None:
    script = (
        "import sys\n"
        "from malaunch.sdk.backends.local.history import History, HistoryRow\n"
        "history = History(sys.argv[1])\n"
        "for i in range(25):\n"
        "    history.update([HistoryRow(f'w{sys.argv[2]}-{i}', 'w', 'SUCCEEDED', 0, 1.0, 1.0, 2.0, None, '')], ())\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(home), str(n)]) for n in range(4)]
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0, 0, 0]
    lines, _, problem = History(str(home)).load()
    assert problem == "" and len(lines) == 100


def test_ten_thousand_ended_jobs_list_from_the_index(home: Path, cli_env: Dict[str, str]) -> None:
    rows = []
    for index in range(10_000):  # folders and rows only: made cheaply; a job with a row is never opened
        job_id = f"many-{index:05d}"
        (home / "jobs" / job_id).mkdir(parents=True)
        rows.append(HistoryRow(job_id, "many", "SUCCEEDED", 0, 1e9 + index, 1e9 + index, 1e9 + index + 5, None, ""))
    History(str(home)).update(rows, ())
    listed = ma_submit(["list", "--limit", "3"], cli_env)
    assert _listed(listed) == ["many-09999", "many-09998", "many-09997"]
    assert listed.stderr == "ma-submit: 9997 more job(s) not shown; --limit N shows more, --limit 0 all\n"
    assert _listed(ma_submit(["list", "--limit", "0"], cli_env))[-1] == "many-00000"


def test_prune_dry_run_state_keep_and_the_disk_freed(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    job_id = _ended_job(tmp_path, cli_env, home)
    failed = _copies(home, job_id, 4, prefix="failed", state="FAILED", exit_code=1)
    stopped = _copies(home, job_id, 2, prefix="stopped", state="STOPPED", exit_code=143)
    before = job_ids(home)
    dry = ma_submit(["prune", "--older-than", "0", "--dry-run"], cli_env)
    assert dry.returncode == 0 and len(dry.stdout.splitlines()) == 7
    assert all(line.startswith("would delete ") for line in dry.stdout.splitlines())
    assert "ma-submit: would prune 7 job(s)" in dry.stderr and "would free" in dry.stderr
    assert job_ids(home) == before
    kept = ma_submit(["prune", "--older-than", "0", "--state", "failed", "--keep", "1"], cli_env)
    assert kept.returncode == 0 and kept.stdout.split() == [w for i in failed[1:] for w in ("deleted", i)]
    assert ", freed " in kept.stderr and " of disk" in kept.stderr
    assert job_ids(home) == sorted([job_id, failed[0], *stopped])
    history = (home / HISTORY_FILE).read_text()
    assert all(name not in history for name in failed[1:]) and failed[0] in history
    both = ma_submit(["prune", "--older-than", "0", "--state", "stopped", "--state", "succeeded"], cli_env)
    assert sorted(both.stdout.split()[1::2]) == sorted([job_id, *stopped])
    assert job_ids(home) == [failed[0]]
    assert ma_submit(["prune", "--state", "running"], cli_env).returncode == 2


def test_prune_never_touches_a_running_job_nor_one_being_read(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    job_id = _ended_job(tmp_path, cli_env, home)
    sleeper = write_job(tmp_path / "sleeper", SLEEPER, name="sleeper")
    running = ma_submit(["--detach", str(sleeper)], cli_env).stdout.strip()
    wait_for(lambda: "up" in ma_submit(["logs", running], cli_env).stdout, what="the sleeper")
    lines = LocalBackend(home=str(home)).logs(job_id)  # a reader of the ended job, as `ma-submit logs` is
    assert next(lines).startswith("[host 0 ma-entrypoint] ")
    busy = ma_submit(["prune", "--older-than", "0"], cli_env)
    assert busy.returncode == 0 and busy.stdout == ""
    assert f"ma-submit: kept job {job_id}: another process is reading it" in busy.stderr
    refused = ma_submit(["delete", job_id], cli_env)
    assert refused.returncode == 2 and "in use" in refused.stderr and "Traceback" not in refused.stderr
    with reading(JobPaths(str(home), job_id)):
        assert "kept job" in ma_submit(["prune", "--older-than", "0"], cli_env).stderr
    lines.close()
    assert ma_submit(["prune", "--older-than", "0"], cli_env).stdout.split() == ["deleted", job_id]
    assert job_ids(home) == [running]
    assert ma_submit(["stop", running], cli_env).returncode == 0


def test_two_prunes_at_once_each_job_goes_once(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    job_id = _ended_job(tmp_path, cli_env, home)
    made = _copies(home, job_id, 40)
    argv = [os.path.join(os.path.dirname(sys.executable), "ma-submit"), "prune", "--older-than", "0"]
    procs = [subprocess.Popen(argv, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]  # fmt: skip
    outs = [proc.communicate(timeout=240) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    deleted = [out.split()[1::2] for out, _ in outs]
    assert sorted(deleted[0] + deleted[1]) == sorted([job_id, *made])
    assert all("kept" not in err and "Traceback" not in err for _, err in outs)
    assert job_ids(home) == [] and not [p for p in home.iterdir() if p.name.startswith(".removing-")]
    assert _history_ids(home) == []


def test_keep_for_is_applied_by_the_next_command(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    job_id = _ended_job(tmp_path, cli_env, home, keep_for="1h")
    state = read_state(str(home / "jobs" / job_id / "state.json")).data
    assert state is not None and state["keep_for"] == 3600.0
    copy_job(home, job_id, "expired-1", ended_at=state["ended_at"] - 7200)
    copy_job(home, job_id, "forever-1", ended_at=state["ended_at"] - 7200, keep_for=None)
    listed = ma_submit(["list"], cli_env)
    assert _listed(listed) == [job_id, "forever-1"]
    assert job_ids(home) == sorted([job_id, "forever-1"])
    copy_job(home, job_id, "expired-2", ended_at=state["ended_at"] - 7200)
    again = write_job(tmp_path / "again", QUICK, name="again")
    assert ma_submit([str(again)], cli_env).returncode == 0  # a submit applies it too
    assert "expired-2" not in job_ids(home) and job_id in job_ids(home)


def test_keep_for_in_the_job_file() -> None:
    base = {"name": "k", "code_dir": "/c", "boot_file": "b.py"}
    assert spec_from_mapping({**base, "keep_for": "7d"}).keep_for == 604800.0
    assert spec_from_mapping({**base, "keep_for": 90}).keep_for == 90
    spec = spec_from_mapping({**base, "keep_for": "12h"})
    assert spec_from_mapping(spec.to_dict()) == spec and "keep_for" not in spec_from_mapping(base).to_dict()
    for bad in ("soon", -1, True):
        with pytest.raises(SpecError, match="keep_for"):
            spec_from_mapping({**base, "keep_for": bad})


def test_keep_for_is_ttl_seconds_after_finished_on_volcano() -> None:
    data = {"name": "k", "code_dir": "/c", "boot_file": "b.py", "image": "reg.example/ml:1", "keep_for": "90.5s"}
    spec = spec_from_mapping(data)
    text, source = load_template(spec.volcano.template)
    manifest = render_manifest(spec, "k-20261122-120000-abcdef", text, source)
    assert manifest["spec"]["ttlSecondsAfterFinished"] == 91
    assert crd_errors(manifest) == []
    plain = render_manifest(spec.replace(keep_for=None), "k-20261122-120000-abcdef", text, source)
    assert "ttlSecondsAfterFinished" not in plain["spec"]
    assert "ttlSecondsAfterFinished" in yaml.safe_dump(manifest)


def test_history_rows_are_read_defensively(home: Path) -> None:
    history = History(str(home))
    (home / "jobs" / "ok-1").mkdir(parents=True)
    row = HistoryRow("ok-1", "ok\tname", "FAILED", 2, 1.0, 1.0, 2.0, 60.0, "host 0 exited\twith code 2\n")
    history.update([row], ())
    lines, next_due, problem = history.load()
    assert problem == "" and next_due == 62.0 and HistoryRow.from_line(lines["ok-1"]) == row
    assert row.due(62.0) and not row.due(61.0)
    (home / HISTORY_FILE).write_text((home / HISTORY_FILE).read_text().replace("\tFAILED\t", "\tRUNNING\t"))

    def unread(name: str) -> Any:
        raise AssertionError(f"{name} has a row: it is not read from its folder")

    snap = history.snapshot(unread)
    assert list(snap.rows()) == [] and snap.bad == {"ok-1"}
    history.settle(snap)
    assert snap.notes == [f"the job history {home / HISTORY_FILE} has 1 damaged row(s); rebuilt them from the job "
                          "folders"]  # fmt: skip
    assert _history_ids(home) == []


def test_cloud_lists_are_filtered_and_paged_as_returned() -> None:
    def status(job_id: str, state: JobState, created: float, name: str = "train") -> JobStatus:
        return JobStatus(id=job_id, backend="volcano", state=state, name=name, created_at=created)

    found = [status("a", JobState.FAILED, 10.0), status("b", JobState.RUNNING, 30.0),
             status("c", JobState.SUCCEEDED, 20.0, "eval"), status("d", JobState.FAILED, 40.0)]  # fmt: skip
    page = page_of(found, ListQuery(limit=2), now=100.0)
    assert [s.id for s in page.statuses] == ["d", "b"] and page.more == 2
    assert [s.id for s in page_of(found, ListQuery(states=frozenset({"FAILED"})), 100.0).statuses] == ["d", "a"]
    assert [s.id for s in page_of(found, ListQuery(name="ev*", limit=0), 100.0).statuses] == ["c"]
    assert [s.id for s in page_of(found, ListQuery(since=75.0), 100.0).statuses] == ["d", "b"]
    assert [s.id for s in page_of(found, ListQuery(older_than=75.0), 100.0).statuses] == ["c", "a"]


def test_modelarts_says_keep_for_is_not_applied(tmp_path: Path) -> None:
    spec = spec_from_mapping({
        "name": "k", "code_dir": str(tmp_path), "boot_file": "b.py", "keep_for": "1d", "image": "reg.example/ml:1",
        "resources": {"flavor": "modelarts.vm.cpu.8u"}, "modelarts": {"obs_dir": "obs://bucket/runs/"},
    })  # fmt: skip
    plan = ModelArtsBackend(environ={"HOME": str(tmp_path)}).plan(spec, job_id="k-1", now=1.0)
    assert any(note.startswith("keep_for is not applied on ModelArts") for note in plan.notes)
    assert not any("keep_for" in note for note in ModelArtsBackend(environ={"HOME": str(tmp_path)}).plan(
        spec.replace(keep_for=None), job_id="k-1", now=1.0).notes)  # fmt: skip


def test_a_profile_keep_for_reaches_the_job_and_the_job_file_beats_it(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    env = {**cli_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    configured = ma_submit(["configure", "--backend", "local", "--keep-for", "2h"], env)
    assert configured.returncode == 0, configured.stderr
    job = write_job(tmp_path / "quick", QUICK, name="quick")
    plan = json.loads(ma_submit([str(job), "--dry-run", "--output", "json"], env).stdout)
    assert plan["spec"]["keep_for"] == 7200.0
    volcano = write_job(tmp_path / "vc", QUICK, name="vc", image="reg.example/ml:1", keep_for="30m",
                        backend="volcano")  # fmt: skip
    manifest = json.loads(ma_submit([str(volcano), "--dry-run", "--output", "json"], env).stdout)["request"]["manifest"]
    assert manifest["spec"]["ttlSecondsAfterFinished"] == 1800
    assert ma_submit([str(job)], env).returncode == 0
    (job_id,) = job_ids(home)
    state = read_state(str(home / "jobs" / job_id / "state.json")).data
    assert state is not None and state["keep_for"] == 7200.0
