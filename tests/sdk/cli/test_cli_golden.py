"""What ``ma-submit`` shows the world, byte for byte: goldens that prove a change of the SDK's layout changed nothing.

Each case is one run of the real ``ma-submit`` in a fresh work folder, recorded as ``golden/cli/<case>.json``
(the arguments, the exit code, stdout and stderr as lists of lines): the dry-run JSON of every template on every
backend (the local plan, the ModelArts create body, the Volcano manifest), the text dry run of every template on
every backend, a sweep's dry run on every backend, the ``--help`` of every verb, and the one error line (with its
exit code) of bad job files, bad options and unknown ids. ``MALAUNCH_UPDATE_GOLDEN=1`` rewrites the files.

Normalised, only where the output varies by nature: the work folder -> ``<WORK>``, the repository -> ``<REPO>``,
the isolated home -> ``<HOME>``, the time stamp and random token of a job or sweep id -> ``<STAMP>``, the clock
readings of a plan (``"created_at"``, ``"now"``) -> ``<TIME>``, the ModelArts client token (a hash of the id)
-> ``<TOKEN>``. No network is needed: the cloud endpoints are
addresses nobody listens on, and a dry run must not need them.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from modelarts_env import AK, PROJECT, SK
from sdkutil import REPO, ma_submit

pytestmark = pytest.mark.process

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "cli"


@dataclass(frozen=True)
class Case:
    """``ma-submit *args`` run in the work folder (``<REPO>`` in an argument is the repository)."""

    name: str
    args: Tuple[str, ...]
    files: Dict[str, str] = field(default_factory=dict)
    credentials: bool = True  # False: no cloud credentials at all (no variables, no profile file)


_TEMPLATES = ("torchrun-ddp", "msrun-mindspore", "ranktable")
_BACKENDS = ("local", "modelarts", "volcano")
_VERBS = (
    "submit", "status", "logs", "stop", "wait", "list", "delete", "prune", "events", "top", "exec", "sweep", "notify",
    "configure", "ui", "host", "checkpoints",
)  # fmt: skip
_SWEEP_VERBS = ("status", "wait", "stop", "logs", "list")
_BOOT = "print('hello')\n"
_GOOD = "name: demo\ncode_dir: .\nboot_file: boot.py\n"

#: Bad job files: ``job.yaml`` as written, submitted with ``--dry-run``.
_BAD_FILES: Dict[str, str] = {
    "unknown-field": _GOOD + "resources:\n  gpus: 2\n",
    "unknown-top-field": _GOOD + "nodes: 2\n",
    "hosts-zero": _GOOD + "resources:\n  hosts: 0\n",
    "hosts-too-many": _GOOD + "resources:\n  hosts: 100000\n",
    "hosts-too-many-local": _GOOD + "resources:\n  hosts: 65\n",
    "hosts-not-number": _GOOD + "resources:\n  hosts: two\n",
    "devices-negative": _GOOD + "resources:\n  devices_per_host: -1\n",
    "bad-run-method": _GOOD + "run_method: deepspeed\n",
    "bad-backend": _GOOD + "backend: slurm\n",
    "missing-name": "code_dir: .\nboot_file: boot.py\n",
    "missing-boot-file": "name: demo\ncode_dir: .\nboot_file: nope.py\n",
    "boot-file-outside": "name: demo\ncode_dir: .\nboot_file: ../boot.py\n",
    "bad-name": "name: -demo\ncode_dir: .\nboot_file: boot.py\n",
    "reserved-env": _GOOD + "env:\n  MA_NUM_HOSTS: '2'\n",
    "env-conflict": _GOOD + "env:\n  MA_TORCHRUN_MASTER_PORT: '1234'\nlauncher:\n  master_port: 4321\n",
    "duplicate-key": _GOOD + "name: again\n",
    "bad-yaml": _GOOD + "resources: [\n",
    "bad-restart-on": _GOOD + "launcher:\n  restart_on: sometimes\n",
    "bad-port": _GOOD + "launcher:\n  master_port: 70000\n",
    "volcano-bad-namespace": _GOOD + "volcano:\n  namespace: Bad_NS\n",
    "volcano-bad-action": _GOOD + "volcano:\n  on_pod_failure: retry\n",
    "volcano-codes-not-list": _GOOD + "volcano:\n  not_retryable_exit_codes: 3\n",
    "volcano-unknown-field": _GOOD + "volcano:\n  queues: a\n",
    "modelarts-bad-obs": _GOOD + "modelarts:\n  obs_dir: s3://bucket/\n",
    "modelarts-engine-half": _GOOD + "modelarts:\n  engine_name: PyTorch\n",
    "modelarts-bad-ssh": _GOOD + "modelarts:\n  ssh: [key]\n",
    "modelarts-unknown-field": _GOOD + "modelarts:\n  bucket: a\n",
    "sweep-in-job-file": _GOOD + "sweep:\n  params:\n    lr: [1, 2]\n",
    "resume-from-without-checkpoint": _GOOD + "resume_from: old-job\n",
    "resume-from-bad-name": _GOOD + "checkpoint: {}\nresume_from: 'old-job:../x'\n",
}

#: Bad options and ids: ``ma-submit *args`` (with a good ``job.yaml`` in the folder).
_BAD_ARGS: Dict[str, Tuple[str, ...]] = {
    "unknown-verb": ("stauts",),
    "no-such-job-file": ("--dry-run", "missing.yaml"),
    "option-after-job-file": ("--dry-run", "job.yaml", "--epochs", "2"),
    "bad-backend-option": ("--backend", "slurm", "--dry-run", "job.yaml"),
    "bad-env-option": ("--env", "NOVALUE", "--dry-run", "job.yaml"),
    "hosts-option-zero": ("--hosts", "0", "--dry-run", "job.yaml"),
    "status-unknown-id": ("status", "no-such-job"),
    "stop-unknown-id": ("stop", "no-such-job"),
    "logs-unknown-id": ("logs", "no-such-job"),
    "wait-unknown-id": ("wait", "no-such-job"),
    "delete-unknown-id": ("delete", "no-such-job"),
    "host-unknown-id": ("host", "lose", "no-such-job", "1"),
    "checkpoints-unknown-id": ("checkpoints", "no-such-job"),
    "resume-from-option-without-checkpoint": ("--resume-from", "no-such-job", "--dry-run", "job.yaml"),
    "prune-bad-duration": ("prune", "--older-than", "soon"),
    "sweep-status-unknown": ("sweep", "status", "no-such-sweep"),
    "sweep-bad-param": ("sweep", "--dry-run", "job.yaml", "--param", "lr"),
    "sweep-no-params": ("sweep", "--dry-run", "job.yaml"),
    "list-empty": ("list",),
    "sweep-list-empty": ("sweep", "list"),
}


def _cases() -> Tuple[Case, ...]:
    cases = []
    for template in _TEMPLATES:
        job = f"<REPO>/templates/{template}/job.yaml"
        for backend in _BACKENDS:
            args = ("--backend", backend, "--dry-run", "--output", "json", job)
            cases.append(Case(f"dry-{template}-{backend}", args))
        cases.append(Case(f"dry-text-{template}", ("--dry-run", job)))
        cases.extend(Case(f"dry-text-{template}-{backend}", ("--backend", backend, "--dry-run", job))
                     for backend in _BACKENDS[1:])  # fmt: skip
    sweep = ("sweep", "--dry-run", "--output", "json", "<REPO>/templates/torchrun-ddp/job.yaml", "--param", "lr=1,3")
    for backend in _BACKENDS:
        cases.append(Case(f"dry-sweep-{backend}", (*sweep, "--backend", backend)))
    resume = ("--backend", "modelarts", "--dry-run", "--resume-from", "old-job:step-00000004")
    cases.append(Case("dry-text-resume-from-modelarts-no-credentials", (*resume, "<REPO>/templates/ranktable/job.yaml"),
                      credentials=False))  # fmt: skip
    cases.append(Case("help", ("--help",)))
    cases.extend(Case(f"help-{verb}", (verb, "--help")) for verb in _VERBS)
    cases.extend(Case(f"help-sweep-{verb}", ("sweep", verb, "--help")) for verb in _SWEEP_VERBS)
    files = {"job.yaml": _GOOD, "boot.py": _BOOT}
    cases.extend(Case(f"bad-{name}", ("--dry-run", "job.yaml"), {**files, "job.yaml": text})
                 for name, text in _BAD_FILES.items())  # fmt: skip
    cases.extend(Case(f"bad-{name}", args, files) for name, args in _BAD_ARGS.items())
    return tuple(cases)


CASES = _cases()
_STAMP = re.compile(r"-\d{8}-\d{6}-[0-9a-z]{4,12}\b")
_TIME_FIELDS = re.compile(r'"(created_at|now|submitted_at)": [0-9.e+]+')
_CLIENT_TOKEN = re.compile(r"client-token [0-9a-f]{20}\b")


def _normalise(text: str, work: Path, home: Path) -> List[str]:
    for path, mark in ((home, "<HOME>"), (work, "<WORK>"), (REPO, "<REPO>")):
        text = text.replace(str(path), mark)
    text = _STAMP.sub("-<STAMP>", text)
    text = _TIME_FIELDS.sub(r'"\1": "<TIME>"', text)
    text = _CLIENT_TOKEN.sub("client-token <TOKEN>", text)
    return text.split("\n")


def _env(cli_env: Dict[str, str], tmp_path: Path, columns: str = "100") -> Dict[str, str]:
    """Credentials that look real and endpoints nobody listens on, as the templates' test gives them."""
    env = {k: v for k, v in cli_env.items() if not k.startswith(("HUAWEICLOUD_", "KUBECONFIG"))}
    env.update(
        HUAWEICLOUD_SDK_AK=AK, HUAWEICLOUD_SDK_SK=SK, HUAWEICLOUD_SDK_PROJECT_ID=PROJECT,
        HUAWEICLOUD_SDK_REGION="cn-north-4", MALAUNCH_MODELARTS_ENDPOINT="http://127.0.0.1:9",
        MALAUNCH_MODELARTS_PROFILE=str(tmp_path / "no-profile.ini"), KUBECONFIG=str(tmp_path / "no-kubeconfig"),
        COLUMNS=columns,
    )  # fmt: skip
    return env


def capture(case: Case, cli_env: Dict[str, str], tmp_path: Path, home: Path, columns: str = "100") -> Dict[str, Any]:
    """Run ``case`` (in a terminal ``columns`` wide, as ``COLUMNS`` says) and return its record, normalised."""
    work = tmp_path / "work"
    work.mkdir()
    for name, text in case.files.items():
        (work / name).write_text(text)
    args = [arg.replace("<REPO>", str(REPO)) for arg in case.args]
    env = _env(cli_env, tmp_path, columns)
    if not case.credentials:
        env = {k: v for k, v in env.items() if not k.startswith("HUAWEICLOUD_SDK_")}
        env["MALAUNCH_MODELARTS_PROFILE"] = "no-profile.ini"  # in the work folder, named as given (not shortened)
    done = ma_submit(args, env, cwd=str(work))
    return {
        "args": list(case.args),
        "exit_code": done.returncode,
        "stdout": _normalise(done.stdout, work, home),
        "stderr": _normalise(done.stderr, work, home),
    }


def test_the_cases_cover_every_template_and_verb() -> None:
    from malaunch.sdk.cli import VERBS

    assert {job.parent.name for job in (REPO / "templates").glob("*/job.yaml")} == set(_TEMPLATES)
    assert set(VERBS) == set(_VERBS)
    assert len({case.name for case in CASES}) == len(CASES)


def assert_golden(name: str, record: Dict[str, Any], golden: Path) -> None:
    """``record`` (no traceback in it) equals the golden file ``golden``; ``MALAUNCH_UPDATE_GOLDEN=1`` writes it."""
    assert not any("Traceback" in line for line in record["stderr"]), record["stderr"]
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    if os.environ.get("MALAUNCH_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.is_file(), f"{name}: no golden file; MALAUNCH_UPDATE_GOLDEN=1 writes it"
    assert text == golden.read_text(), f"{name}: ma-submit's output changed; MALAUNCH_UPDATE_GOLDEN=1 rewrites"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_cli_golden(case: Case, cli_env: Dict[str, str], tmp_path: Path, home: Path) -> None:
    assert_golden(case.name, capture(case, cli_env, tmp_path, home), GOLDEN / f"{case.name}.json")
