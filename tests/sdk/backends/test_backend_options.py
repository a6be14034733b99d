"""A backend's options and id format live beside it (``<backend>/options.py``); the loader and the CLI ask the
backend through :mod:`malaunch.sdk.backends` instead of knowing Volcano themselves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
from fake_modelarts import FakeModelArts
from malaunch.sdk import load_job_file
from malaunch.sdk.backends import backend_for_id, options_hook
from malaunch.sdk.backends.modelarts import options as modelarts_options
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.backends.volcano import options as volcano_options
from modelarts_env import AK, PROJECT, SK
from sdkutil import ma_submit
from test_modelarts_api import body

SDK = Path(__file__).resolve().parents[3] / "sdk"


def test_each_backend_says_which_ids_are_its() -> None:
    assert backend_for_id("ml/train-20260101-000000-abcdef") == "volcano"
    assert backend_for_id("3faf5c03-aaa1-4cbe-879d-24b05d997347") == "modelarts"
    assert backend_for_id("train-20260101-000000-abcdef") is None  # local and modelarts names: ask the index
    assert backend_for_id("Bad/Id") is None


def test_the_loader_asks_the_backend_for_its_section(tmp_path: Path) -> None:
    assert options_hook("volcano") is volcano_options.prepare_options
    assert options_hook("modelarts") is modelarts_options.prepare_options  # its ssh key pairs (issue 19)
    assert options_hook("launcher") is None
    (tmp_path / "t.yaml").write_text("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\n")
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: a\ncode_dir: .\nboot_file: b.py\n"
        "volcano: {queue: null, not_retryable_exit_codes: [3, 4], template: t.yaml}\n"
    )
    spec = load_job_file(str(job))
    assert spec.volcano.queue == "default" and spec.volcano.not_retryable_exit_codes == (3, 4)
    assert spec.volcano.template == str(tmp_path / "t.yaml")


def test_no_volcano_knowledge_in_the_loader_or_the_cli() -> None:
    assert "cls is VolcanoOptions" not in (SDK / "spec" / "loader.py").read_text()
    for name in ("cli/app.py", "cli/jobs.py"):
        text = (SDK / name).read_text()
        assert "_VOLCANO_ID" not in text and '"volcano"' not in text, name


def test_asking_a_backend_loads_no_client_library() -> None:
    code = (
        "import sys; from malaunch.sdk.backends import backend_for_id, options_hook; "
        "backend_for_id('ml/x'); options_hook('volcano'); "
        "print(sorted(m for m in ('kubernetes', 'requests', 'boto3', 'urllib3', 'tenacity') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.process
def test_an_id_from_the_modelarts_console_finds_its_backend(fake_ma: FakeModelArts, cli_env: Dict[str, str]) -> None:
    env = {
        **cli_env, "HUAWEICLOUD_SDK_AK": AK, "HUAWEICLOUD_SDK_SK": SK, "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT,
        "HUAWEICLOUD_SDK_REGION": "cn-north-4", "MALAUNCH_MODELARTS_ENDPOINT": fake_ma.url,
    }  # fmt: skip
    backend = ModelArtsBackend(environ=env, progress=None)
    platform_id = backend.api.create_job(body("console-job"))["metadata"]["id"]
    done = ma_submit(["status", platform_id], env)  # no --backend, no job index entry: the UUID says modelarts
    assert done.returncode == 0, done.stderr
    assert "id:        console-job" in done.stdout  # given back as the one id, the job's name
    by_name = ma_submit(["status", "--backend", "modelarts", "console-job"], env)  # found by a search by name
    assert by_name.returncode == 0 and "id:        console-job" in by_name.stdout, by_name.stderr
