"""Fixtures for the ModelArts backend tests: moto's S3 server as a subprocess (one per session, emptied for each
test: :mod:`moto_env`'s, given on here), the fake ModelArts API, and the environment ``ma-submit`` gets
(credentials and 127.0.0.1 endpoints only)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, Iterator, Tuple

import boto3
import pytest
from botocore.config import Config
from fake_modelarts import FakeModelArts
from moto_env import moto_process, moto_s3, moto_server

__all__ = ["AK", "BUCKET", "PROJECT", "SK", "fake_ma", "ma_env", "moto_no_put", "moto_s3", "moto_server", "s3"]

AK = "AKTESTMALAUNCH0001"
SK = "sk-SECRET-9f8e7d6c5b4a39281706"
PROJECT = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
BUCKET = "malaunch-test"


@pytest.fixture
def moto_no_put(tmp_path: Path) -> Iterator[Tuple[str, str, str]]:
    """moto's server enforcing IAM: the bucket exists, the user (url, ak, sk) may read it but not PutObject."""
    setup_calls = 4  # create_bucket, create_user, put_user_policy, create_access_key: unauthenticated
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(setup_calls))
    with moto_process(tmp_path / "moto-iam.log", env) as url:
        common = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "setup"}
        admin = boto3.client("s3", aws_secret_access_key="setup", config=Config(s3={"addressing_style": "path"}),
                             **common)  # fmt: skip
        iam = boto3.client("iam", aws_secret_access_key="setup", **common)
        admin.create_bucket(Bucket=BUCKET)
        iam.create_user(UserName="reader")
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": ["s3:*"], "Resource": "*"},
                {"Effect": "Deny", "Action": ["s3:PutObject"], "Resource": "*"},
            ],
        }
        iam.put_user_policy(UserName="reader", PolicyName="no-put", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        yield url, key["AccessKeyId"], key["SecretAccessKey"]


@pytest.fixture
def s3(moto_s3: str) -> object:
    """A boto3 client of the moto server with the test bucket made."""
    client = boto3.client(
        "s3",
        endpoint_url=moto_s3,
        region_name="us-east-1",
        aws_access_key_id=AK,
        aws_secret_access_key="other-key-for-setup",
        config=Config(s3={"addressing_style": "path"}),
    )
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def fake_ma() -> Iterator[FakeModelArts]:
    """The fake ModelArts API (started; stopped after the test)."""
    fake = FakeModelArts(AK, SK, PROJECT)
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def ma_env(cli_env: Dict[str, str], fake_ma: FakeModelArts, moto_s3: str, tmp_path: Path) -> Dict[str, str]:
    """``ma-submit``'s environment: credentials, and endpoints on 127.0.0.1 only."""
    env = {k: v for k, v in cli_env.items() if not k.startswith(("HUAWEICLOUD_", "AWS_"))}
    env.update(
        HUAWEICLOUD_SDK_AK=AK,
        HUAWEICLOUD_SDK_SK=SK,
        HUAWEICLOUD_SDK_PROJECT_ID=PROJECT,
        HUAWEICLOUD_SDK_REGION="cn-north-4",
        MALAUNCH_MODELARTS_ENDPOINT=fake_ma.url,
        MALAUNCH_OBS_ENDPOINT=moto_s3,
        MALAUNCH_MODELARTS_PROFILE=str(tmp_path / "no-profile.ini"),
        AWS_CONFIG_FILE=str(tmp_path / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-aws-credentials"),
    )
    return env
