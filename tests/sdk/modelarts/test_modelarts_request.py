"""Job spec -> ModelArts create body: golden bodies, every body fits the official ``Job`` model, clear errors."""

from __future__ import annotations

import copy
from typing import Any, Dict

import pytest
from ma_models import model_errors
from malaunch.sdk import SpecError, spec_from_mapping
from malaunch.sdk.backends.modelarts.request import (
    CreateRequest,
    args_to_parameters,
    build_create_body,
    client_token,
    find_token,
    obs_join,
)
from malaunch.sdk.spec.model import JobSpec

JOB_ID = "ddp-20260101-000000-abc123"
BASE: Dict[str, Any] = {
    "name": "ddp",
    "backend": "modelarts",
    "run_method": "torchrun",
    "code_dir": "/work/code",
    "boot_file": "train/main.py",
    "args": ["--epochs", "3", "--lr=0.1"],
    "image": "swr.cn-north-4.myhuaweicloud.com/team/torch:1",
    "resources": {"hosts": 2, "flavor": "modelarts.pool.visual.8xlarge", "pool": "pool-a1"},
    "env": {"NCCL_DEBUG": "INFO"},
    "inputs": [{"name": "data_url", "path": "obs://bucket/data/"}],
    "outputs": [{"name": "train_url"}],
    "launcher": {"master_port": 29600, "torchrun_extra_params": "--rdzv_conf=timeout=7200", "grace_period": 5},
    "modelarts": {"obs_dir": "obs://bucket/runs"},
}


def spec(**changes: Any) -> JobSpec:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return spec_from_mapping(data)


def test_golden_custom_image_body() -> None:
    body = build_create_body(spec(), JOB_ID)
    assert body == {
        "kind": "job",
        "metadata": {"name": JOB_ID, "description": f"malaunch client-token {client_token(JOB_ID)}"},
        "algorithm": {
            "code_dir": "obs://bucket/runs/ddp/code/",
            "command": "ma-entrypoint /home/ma-user/modelarts/user-job-dir/code/train/main.py --epochs 3 --lr=0.1",
            "engine": {"image_url": "swr.cn-north-4.myhuaweicloud.com/team/torch:1"},
            "inputs": [
                {"name": "data_url", "access_method": "parameter", "remote": {"obs": {"obs_url": "obs://bucket/data/"}}}
            ],
            "outputs": [
                {
                    "name": "train_url",
                    "access_method": "parameter",
                    "remote": {"obs": {"obs_url": f"obs://bucket/runs/{JOB_ID}/outputs/train_url/"}},
                }
            ],
            "environments": {
                "MA_RUN_METHOD": "torchrun",
                "MA_TORCHRUN_MASTER_PORT": "29600",
                "MA_EXTRA_TORCHRUN_PARAMS": "--rdzv_conf=timeout=7200",
                "MALAUNCH_GRACE_PERIOD": "5",
                "MALAUNCH_JOB_ID": JOB_ID,
                "MALAUNCH_JOB_SECRET": "<secret>",  # the plan's placeholder; execute sends the job's secret
                "NCCL_DEBUG": "INFO",
            },
        },
        "spec": {
            "resource": {"flavor_id": "modelarts.pool.visual.8xlarge", "node_count": 2, "pool_id": "pool-a1"},
            "log_export_path": {"obs_url": f"obs://bucket/runs/{JOB_ID}/logs/"},
        },
    }
    assert model_errors(body, "Job") == []


def test_golden_preset_engine_body() -> None:
    preset = spec(
        image=None,
        run_method="msrun",
        code_dir="obs://bucket/code/v1",
        launcher={"msrun_master_port": 8118, "msrun_rank_table": True, "msrun_cluster_time_out": 900},
        modelarts={"obs_dir": "obs://bucket/runs/", "engine_name": "Ascend-Powered-Engine", "engine_version": "v2"},
        inputs=[],
        outputs=[],
    )
    body = build_create_body(preset, JOB_ID)
    algorithm = body["algorithm"]
    assert algorithm["code_dir"] == "obs://bucket/code/v1/"
    assert algorithm["boot_file"] == "obs://bucket/code/v1/train/main.py"
    assert "command" not in algorithm
    assert algorithm["engine"] == {"engine_name": "Ascend-Powered-Engine", "engine_version": "v2"}
    assert algorithm["parameters"] == [{"name": "epochs", "value": "3"}, {"name": "lr", "value": "0.1"}]
    assert algorithm["environments"] == {
        "MA_RUN_METHOD": "msrun",
        "MA_MSRUN_MASTER_PORT": "8118",
        "MS_RANKTABLE_ENABLE": "True",
        "MSRUN_CLUSTER_TIME_OUT": "900",
        "MALAUNCH_JOB_ID": JOB_ID,
        "MALAUNCH_JOB_SECRET": "<secret>",
        "NCCL_DEBUG": "INFO",
    }
    assert model_errors(body, "Job") == []
    request = CreateRequest.for_spec(preset, job_id=JOB_ID, endpoint="https://ma.example", project_id="p1")
    assert request.uploads == ()  # an obs:// code_dir is used as is
    assert request.url == "https://ma.example/v2/p1/training-jobs"


def test_ranktable_with_a_preset_engine_leaves_ma_run_method_to_the_platform() -> None:
    preset = spec(
        image=None,
        run_method="ranktable",
        launcher={},
        modelarts={"obs_dir": "obs://bucket/runs/", "engine_name": "E", "engine_version": "1"},
    )
    assert "MA_RUN_METHOD" not in build_create_body(preset, JOB_ID)["algorithm"]["environments"]
    assert (
        build_create_body(spec(run_method="ranktable", launcher={}), JOB_ID)["algorithm"]["environments"][
            "MA_RUN_METHOD"
        ]
        == "ranktable"
    )


def test_plan_is_pure_and_the_token_round_trips() -> None:
    one = spec()
    before = one.to_dict()
    first = CreateRequest.for_spec(one, job_id=JOB_ID, endpoint="https://e", project_id="p")
    second = CreateRequest.for_spec(one, job_id=JOB_ID, endpoint="https://e", project_id="p")
    assert first == second and one.to_dict() == before
    assert find_token(dict(first.body)) == first.client_token == client_token(JOB_ID)
    assert client_token("other-id") != first.client_token
    assert find_token({"metadata": {"description": "someone else's job"}}) is None


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"resources": {"hosts": 2}}, "resources.flavor", "is required for the modelarts backend"),
        ({"modelarts": None}, "modelarts.obs_dir", "is required"),
        ({"image": None}, "image", "container image or a preset engine"),
        ({"inputs": [{"name": "d", "path": "/local/data"}]}, "inputs[0].path", "obs:// URL"),
        ({"outputs": [{"name": "o", "path": "/local/out"}]}, "outputs[0].path", "obs:// URL"),
    ],
)
def test_what_cannot_map_is_a_clear_spec_error(changes: Dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        build_create_body(spec(**changes), JOB_ID)
    assert caught.value.field == field and words in str(caught.value)


def test_at_most_100_environments() -> None:
    env = {f"V{i}": "x" for i in range(95)}
    with pytest.raises(SpecError) as caught:
        build_create_body(spec(env=env), JOB_ID)
    assert caught.value.field == "env" and "at most 100" in str(caught.value)
    build_create_body(spec(env={f"V{i}": "x" for i in range(94)}), JOB_ID)  # 94 + 6 set by malaunch = 100


def test_args_to_parameters() -> None:
    assert args_to_parameters(["--a", "1", "--b=2", "--flag", "--c", "x y"]) == [
        {"name": "a", "value": "1"},
        {"name": "b", "value": "2"},
        {"name": "flag", "value": ""},
        {"name": "c", "value": "x y"},
    ]
    with pytest.raises(SpecError) as caught:
        args_to_parameters(["--a", "1", "2"])
    assert caught.value.field == "args[2]"


def test_obs_join() -> None:
    assert obs_join("obs://b/p", "x", "code/") == "obs://b/p/x/code/"
    assert obs_join("obs://b/p/", "file.py") == "obs://b/p/file.py"


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"obs_dir": "s3://bucket/x"}, "modelarts.obs_dir"),
        ({"obs_dir": "obs://B/x"}, "modelarts.obs_dir"),
        ({"obs_dir": "obs://bucket/", "engine_name": "E"}, "modelarts.engine_name"),
        ({"obs_dir": "obs://bucket/", "bucket": "x"}, "modelarts.bucket"),
    ],
)
def test_modelarts_section_is_validated(section: Dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec(modelarts=section)
    assert caught.value.field == field


def test_modelarts_section_round_trips() -> None:
    one = spec()
    assert spec_from_mapping(one.to_dict()) == one
    assert one.to_dict()["modelarts"] == {"obs_dir": "obs://bucket/runs", "engine_name": None, "engine_version": None,
                                          "job_retry_num": None, "job_unconditional_retry": False}  # fmt: skip
