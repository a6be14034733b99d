"""Run a fake ModelArts job's nodes for real: the code the job names is downloaded from (moto's) OBS and each
node's ``algorithm.command`` runs as a process on this machine, with the platform's variables.

This is what the platform does with a custom image: one container per node, the code under
``/home/ma-user/modelarts/user-job-dir``, ``MA_NUM_HOSTS``/``VC_TASK_INDEX``/``VC_WORKER_HOSTS``/``MA_NUM_GPUS``
set, ``algorithm.environments`` added. Here "containers" are process groups, the container path is mapped
to a folder, node N has the loopback address ``127.0.0.(N+1)``, and each node's output goes to a log file.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

__all__ = ["CONTAINER_JOB_DIR", "Containers"]

CONTAINER_JOB_DIR = "/home/ma-user/modelarts/user-job-dir"
_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONDONTWRITEBYTECODE")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Containers:
    """The nodes of one job: started at creation, watched for exit codes, terminated on request."""

    def __init__(self, job_id: str, body: Mapping[str, Any], s3: Any, root: Path, devices: int) -> None:
        self.job_id = job_id
        algorithm = body["algorithm"]
        nodes = int(body["spec"]["resource"].get("node_count", 1))
        self.job_dir = root / job_id / "user-job-dir"
        code_url: str = algorithm["code_dir"]
        bucket, _, prefix = code_url[len("obs://") :].partition("/")
        code = self.job_dir / Path(prefix.rstrip("/")).name
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                target = code / item["Key"][len(prefix) :]
                target.parent.mkdir(parents=True, exist_ok=True)
                s3.download_file(bucket, item["Key"], str(target))
        argv = [word.replace(CONTAINER_JOB_DIR, str(self.job_dir)) for word in shlex.split(algorithm["command"])]
        hosts = [f"127.0.0.{index + 1}" for index in range(nodes)]
        environments: Dict[str, str] = dict(algorithm.get("environments") or {})
        environments.setdefault("MA_TORCHRUN_MASTER_PORT", str(_free_port()))
        self.logs: List[Path] = []
        self.procs: List[subprocess.Popen[bytes]] = []
        for index, address in enumerate(hosts):
            node_dir = root / job_id / f"worker-{index}"
            node_dir.mkdir(parents=True)
            env = {key: os.environ[key] for key in _KEEP if key in os.environ}
            env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "/usr/bin:/bin")])
            env.update(environments)
            env.update(
                MA_NUM_HOSTS=str(nodes), VC_WORKER_NUM=str(nodes), MA_NUM_GPUS=str(devices),
                VC_TASK_INDEX=str(index), VC_WORKER_HOSTS=",".join(hosts), MA_VJ_NAME=f"modelarts-job-{job_id}",
                MA_TASK_NAME="worker", MA_JOB_DIR=str(self.job_dir), MA_CURRENT_HOST_IP=address,
                MA_CURRENT_INSTANCE_NAME=f"modelarts-job-{job_id}-worker-{index}", MA_LOG_DIR=str(node_dir),
                MALAUNCH_LOG_DIR=str(node_dir), MALAUNCH_REPORT_FILE=str(node_dir / "report.json"),
                PYTHONUNBUFFERED="1",
            )  # fmt: skip
            log = node_dir / "console.log"
            self.logs.append(log)
            with open(log, "wb") as out:
                self.procs.append(
                    subprocess.Popen(
                        argv,
                        cwd=str(code),
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )

    def exit_codes(self) -> Optional[List[int]]:
        """Every node's exit code once all have ended, else None. Like the platform, the first node that
        fails ends the job: the others are terminated."""
        codes = [proc.poll() for proc in self.procs]
        if any(code is None for code in codes):
            if any(code for code in codes):
                self.terminate()
            return None
        return [code if code >= 0 else 128 - code for code in codes if code is not None]

    def log(self, index: int) -> str:
        try:
            return self.logs[index].read_text(errors="replace")
        except OSError:
            return ""

    def terminate(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)

    def kill(self) -> None:
        """Make sure nothing is left (the test's teardown)."""
        self.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
