"""moto's server is started once per session (tests/sdk/moto_env.py, ``moto_server``) and every test that
takes ``moto_s3`` gets it as new: what an earlier test put there (a bucket, an object, an IAM user) is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SDK_TESTS = Path(__file__).resolve().parents[1]
ENTRYPOINT_TESTS = SDK_TESTS.parent / "entrypoint"  # procutil, which moto_env takes a name from

PROBE = """
import boto3
from botocore.config import Config
from moto_env import moto_s3, moto_server  # noqa: F401


def _clients(url):
    common = dict(endpoint_url=url, region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    return boto3.client("s3", config=Config(s3={"addressing_style": "path"}), **common), boto3.client("iam", **common)


def test_first_fills_the_server(moto_s3, tmp_path_factory):
    s3, iam = _clients(moto_s3)
    s3.create_bucket(Bucket="left-behind")
    s3.put_object(Bucket="left-behind", Key="k", Body=b"v")
    iam.create_user(UserName="left-behind")
    (tmp_path_factory.getbasetemp() / "url").write_text(moto_s3)


def test_second_finds_the_same_server_empty(moto_s3, tmp_path_factory):
    s3, iam = _clients(moto_s3)
    assert (tmp_path_factory.getbasetemp() / "url").read_text() == moto_s3, "one server for the session"
    assert s3.list_buckets()["Buckets"] == []
    assert iam.list_users()["Users"] == []
"""


@pytest.mark.slow  # a pytest session and a moto server
def test_one_server_per_session_and_each_test_finds_it_empty(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SDK_TESTS), str(ENTRYPOINT_TESTS),
                                                   os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
            "--rootdir", str(tmp_path), "-c", os.devnull, "test_probe.py"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
