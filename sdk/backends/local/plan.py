"""Pure planning for the local backend: spec -> :class:`LocalRequest` (per-host argv, environment, files).

Each emulated host runs the real shim, ``<python> -m malaunch.entrypoint <boot file> <args>``, with the
variables a ModelArts container gets (``docs/sdk.md`` lists them). Everything here is a pure function of its
arguments; ports the spec leaves open are :data:`~malaunch.sdk.plan.AUTO` until
:meth:`LocalRequest.with_ports` fills them in at execution time.

Job directory layout (``<home>/jobs/<job id>/``)::

    plan.json  state.json  runner.log  rank_table/jobstart_hccl.json
    code/<code folder>/...                      snapshot of code_dir (MA_JOB_DIR=code)
    hosts/<i>/console.log  hosts/<i>/report.json  hosts/<i>/logs/
    outputs/<name>/                             outputs without a path
    checkpoints/                                with a checkpoint: section (MALAUNCH_CHECKPOINT_DIR; with
                                                resume_from, MALAUNCH_RESUME_SOURCE is another job's)
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from malaunch.entrypoint.public import Name, seconds_default

from ...errors import ConfigError
from ...notify.payload import notify_variable
from ...plan import AUTO, SECRET
from ...redact import mask_env
from ...spec import contract
from ...spec.model import JobSpec
from ...spec.resume import ResumeRef, parse_resume
from .hostnet import HostNetwork
from .jobdir import JobPaths

__all__ = [
    "MAX_LOCAL_HOSTS",
    "MAX_LOCAL_PROCESSES",
    "HostCommand",
    "LocalRequest",
    "build_rank_table",
    "host_environment",
    "plan_local",
    "source_folder",
    "with_secret",
]

MAX_LOCAL_HOSTS = 64
MAX_LOCAL_PROCESSES = 256
SHIM_MODULE = "malaunch.entrypoint"
RANK_TABLE_NAME = "jobstart_hccl.json"
#: Seconds from SIGTERM to SIGKILL when the job file gives none: the shim's own default (the contract's table).
DEFAULT_GRACE_PERIOD = seconds_default(Name.MALAUNCH_GRACE_PERIOD)
# Inherited variables that would contradict the emulated platform: dropped before the host's own are added.
_STRIP_PREFIXES = ("MA_", "VC_", "MALAUNCH_", "TORCHELASTIC_", "MS_")
_STRIP_NAMES = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "RANK_ID",
    "RANK_SIZE", "DEVICE_ID", "ASCEND_DEVICE_ID", "RANK_TABLE_FILE", "MSRUN_CLUSTER_TIME_OUT",
)  # fmt: skip


@dataclass(frozen=True)
class HostCommand:
    """One emulated host: what runs, with which variables (only those the backend sets), where it logs."""

    index: int
    address: str
    instance_name: str
    argv: Tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    console_log: str
    report_file: str

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data."""
        return {
            "index": self.index,
            "address": self.address,
            "instance_name": self.instance_name,
            "argv": list(self.argv),
            "env": dict(sorted(self.env.items())),
            "cwd": self.cwd,
            "console_log": self.console_log,
            "report_file": self.report_file,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HostCommand:
        """Inverse of :meth:`to_json`."""
        return cls(
            index=int(data["index"]),
            address=str(data["address"]),
            instance_name=str(data["instance_name"]),
            argv=tuple(str(x) for x in data["argv"]),
            env={str(k): str(v) for k, v in data["env"].items()},
            cwd=str(data["cwd"]),
            console_log=str(data["console_log"]),
            report_file=str(data["report_file"]),
        )


@dataclass(frozen=True)
class LocalRequest:
    """What the local backend will do for one job; executed by ``LocalBackend.execute`` and the job runner."""

    job_id: str
    job_dir: str
    code_src: str
    code_dest: str
    network: Mapping[str, Any]
    hosts: Tuple[HostCommand, ...]
    files: Mapping[str, str] = field(default_factory=dict)  # path -> text written before the hosts start
    dirs: Tuple[str, ...] = ()  # folders created before the hosts start
    auto_ports: Tuple[str, ...] = ()  # variables still AUTO, filled by with_ports()
    grace_period: float = DEFAULT_GRACE_PERIOD

    def with_ports(self, ports: Mapping[str, int]) -> LocalRequest:
        """A copy whose AUTO variables in ``ports`` get those values (on every host)."""
        hosts = tuple(
            replace(h, env={k: (str(ports[k]) if k in ports and v == AUTO else v) for k, v in h.env.items()})
            for h in self.hosts
        )
        left = tuple(name for name in self.auto_ports if name not in ports)
        return replace(self, hosts=hosts, auto_ports=left)

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data (the content of ``plan.json``'s ``request``)."""
        return {
            "job_id": self.job_id,
            "job_dir": self.job_dir,
            "code_src": self.code_src,
            "code_dest": self.code_dest,
            "network": dict(self.network),
            "hosts": [host.to_json() for host in self.hosts],
            "files": dict(sorted(self.files.items())),
            "dirs": list(self.dirs),
            "auto_ports": list(self.auto_ports),
            "grace_period": self.grace_period,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LocalRequest:
        """Inverse of :meth:`to_json`."""
        return cls(
            job_id=str(data["job_id"]),
            job_dir=str(data["job_dir"]),
            code_src=str(data["code_src"]),
            code_dest=str(data["code_dest"]),
            network=dict(data["network"]),
            hosts=tuple(HostCommand.from_json(h) for h in data["hosts"]),
            files={str(k): str(v) for k, v in data.get("files", {}).items()},
            dirs=tuple(str(d) for d in data.get("dirs", ())),
            auto_ports=tuple(str(p) for p in data.get("auto_ports", ())),
            grace_period=float(data.get("grace_period", DEFAULT_GRACE_PERIOD)),
        )

    def render(self) -> str:
        """Text for ``--dry-run``: each host's command and environment, then the files to write."""
        lines = [
            f"  job dir:     {self.job_dir}",
            f"  code:        {self.code_src} -> {self.code_dest} (copied at submit)",
            f"  network:     {self.network.get('kind')} {', '.join(self.network.get('addresses', []))}",
        ]
        if self.auto_ports:
            lines.append(f"  {AUTO}:      a free port is chosen at submit for {', '.join(self.auto_ports)}")
        for host in self.hosts:
            lines.append(f"host {host.index} ({host.address}, {host.instance_name})")
            lines.append(f"  cwd: {host.cwd}")
            lines.append(f"  command: {shlex.join(host.argv)}")
            lines.append(f"  console log: {host.console_log}")
            lines.append("  environment (added to the inherited one):")
            lines.extend(f"    {key}={value}" for key, value in sorted(mask_env(host.env).items()))
        for path, text in sorted(self.files.items()):
            lines.append(f"file {path}:")
            lines.extend(f"  {line}" for line in text.splitlines())
        return "\n".join(lines)


def build_rank_table(addresses: Tuple[str, ...], devices_per_host: int) -> Dict[str, Any]:
    """A v1.0 rank table: one server per host (``server_id`` = its address), devices 0..G-1, ranks consecutive."""
    servers = []
    for index, address in enumerate(addresses):
        devices = [
            {"device_id": str(d), "device_ip": address, "rank_id": str(index * devices_per_host + d)}
            for d in range(devices_per_host)
        ]
        servers.append({"server_id": address, "device": devices, "host_nic_ip": "reserve"})
    return {
        "version": "1.0",
        "server_count": str(len(addresses)),
        "server_list": servers,
        "status": "completed",
    }


def host_environment(inherited: Mapping[str, str], host_env: Mapping[str, str], python: str) -> Dict[str, str]:
    """The full environment of a host: ``inherited`` minus platform/rank variables, the interpreter's folder
    first on ``PATH``, then the host's own variables (which win)."""
    env = {k: v for k, v in inherited.items() if not (k.startswith(_STRIP_PREFIXES) or k in _STRIP_NAMES)}
    bin_dir = os.path.dirname(python)
    path = env.get("PATH", "")
    if bin_dir and bin_dir not in path.split(os.pathsep):
        env["PATH"] = f"{bin_dir}{os.pathsep}{path}" if path else bin_dir
    env.update(host_env)
    return env


def with_secret(env: Mapping[str, str], secret: Optional[str]) -> Dict[str, str]:
    """A host's environment with the job's ``secret`` in place of the plan's placeholder.

    The secret never goes to disk: ``execute`` hands it to the job runner in the runner's own environment
    (readable by the job's owner only) and the runner puts it here when it starts a host. Without one (a runner
    started by hand) the variable is left out, and the shims fall back to the job's name.
    """
    out = dict(env)
    if out.get(Name.MALAUNCH_JOB_SECRET) == SECRET:
        if secret:
            out[Name.MALAUNCH_JOB_SECRET] = secret
        else:
            del out[Name.MALAUNCH_JOB_SECRET]
    return out


def _check_local(spec: JobSpec, devices: int) -> None:
    hosts = spec.resources.hosts
    if hosts > MAX_LOCAL_HOSTS:
        raise ConfigError(
            "resources.hosts: too many hosts for the local backend", hosts, f"use at most {MAX_LOCAL_HOSTS}"
        )
    if hosts * max(devices, 1) > MAX_LOCAL_PROCESSES:
        raise ConfigError(
            "resources: too many processes for the local backend (hosts x devices_per_host)",
            hosts * devices,
            f"use at most {MAX_LOCAL_PROCESSES} in total",
        )
    wants_table = spec.run_method == "ranktable" or (spec.run_method == "msrun" and spec.launcher.msrun_rank_table)
    if wants_table and devices < 1:
        raise ConfigError(
            "resources.devices_per_host: a rank table needs at least one device per host",
            devices,
            "set devices_per_host >= 1 (one process per device)",
        )
    for item in (*spec.inputs, *spec.outputs):
        if item.path is not None and "://" in item.path:
            raise ConfigError(
                f"{item.name}: the local backend reads and writes local paths only",
                item.path,
                "give a local path, or use a cloud backend for obs:// data",
            )


def source_folder(home: str, ref: ResumeRef) -> str:
    """The folder ``ref`` names (its whole job id resolved): the job's checkpoint folder, or one checkpoint in it,
    which the plan gives as ``MALAUNCH_RESUME_SOURCE``."""
    folder = JobPaths(home, ref.job_id).checkpoint_dir
    return folder if ref.name is None else os.path.join(folder, ref.name)


def plan_local(
    spec: JobSpec, *, job_id: str, home: str, python: str, network: HostNetwork
) -> Tuple[LocalRequest, Tuple[str, ...]]:
    """Plan ``spec`` for the local backend. Pure. Returns the request and notes for the user.

    Raises:
        ConfigError: the spec cannot run locally (too many hosts, obs:// data, a rank table without devices).
    """
    res = spec.resources
    _check_local(spec, res.devices_per_host)
    paths = JobPaths(home, job_id)
    job_dir = paths.job_dir
    code_name = os.path.basename(os.path.normpath(spec.code_dir)) or "code"
    ma_job_dir = paths.code_root
    code_dest = os.path.join(ma_job_dir, code_name)
    boot = os.path.join(code_dest, os.path.normpath(spec.boot_file))
    addresses = network.addresses()
    files: Dict[str, str] = {}
    dirs: List[str] = []
    common: Dict[str, str] = {
        Name.MA_NUM_HOSTS: str(res.hosts),
        Name.VC_WORKER_NUM: str(res.hosts),
        Name.MA_NUM_GPUS: str(res.devices_per_host),
        Name.VC_WORKER_HOSTS: ",".join(addresses),
        Name.MA_VJ_NAME: job_id,
        Name.MA_TASK_NAME: "worker",
        Name.MA_RUN_METHOD: spec.run_method,
        Name.MA_JOB_DIR: ma_job_dir,
        Name.MALAUNCH_JOB_ID: job_id,
        Name.MALAUNCH_JOB_SECRET: SECRET,  # the placeholder; the runner gives each host the value (with_secret)
    }
    notify = notify_variable(spec, job_id, "local")
    if notify is not None:  # host 0's shim sends the job's events; secrets stay in the variables named
        common[Name.MALAUNCH_NOTIFY] = notify
    if spec.checkpoint is not None:
        common[Name.MALAUNCH_CHECKPOINT_DIR] = paths.checkpoint_dir
        common[Name.MALAUNCH_CHECKPOINT_KEEP] = str(spec.checkpoint.keep)
        dirs.append(paths.checkpoint_dir)
    if spec.resume_from is not None:  # checked (whole id, ended, complete) by resume_check before the plan
        common[Name.MALAUNCH_RESUME_SOURCE] = source_folder(home, parse_resume(spec.resume_from))
    launcher_env = contract.launcher_env(spec, open_port=AUTO)
    auto = [name for name, value in launcher_env.items() if value == AUTO]
    common.update(launcher_env)
    notes: List[str] = []
    if spec.run_method == "ranktable" or (spec.run_method == "msrun" and spec.launcher.msrun_rank_table):
        table_path = os.path.join(paths.rank_table_dir, RANK_TABLE_NAME)
        files[table_path] = json.dumps(build_rank_table(addresses, res.devices_per_host), indent=2) + "\n"
        common[Name.RANK_TABLE_FILE] = table_path
    elif spec.launcher.msrun_rank_table:
        notes.append(f"launcher.msrun_rank_table is ignored for run_method {spec.run_method}")
    if spec.launcher.master_port is not None and spec.run_method == "msrun":
        notes.append("launcher.master_port is ignored for msrun; use launcher.msrun_master_port")
    if spec.image:
        notes.append(f"image {spec.image} is ignored by the local backend (it runs with {python})")
    for key in ("flavor", "pool"):
        if getattr(res, key):
            notes.append(f"resources.{key} is ignored by the local backend")
    data_args: List[str] = []
    for item in spec.inputs:
        data_args.append(f"--{item.name}={item.path}")
    for item in spec.outputs:
        path = item.path or paths.output_dir(item.name)
        dirs.append(path)
        data_args.append(f"--{item.name}={path}")
    hosts = []
    for index, address in enumerate(addresses):
        log_dir = paths.log_dir(index)
        report = paths.report_file(index)
        env = dict(common)
        env.update(
            {
                Name.VC_TASK_INDEX: str(index),
                Name.MA_CURRENT_HOST_IP: address,
                Name.MA_CURRENT_INSTANCE_NAME: f"{job_id}-worker-{index}",
                Name.MA_LOG_DIR: log_dir,
                Name.MALAUNCH_LOG_DIR: log_dir,
                Name.MALAUNCH_REPORT_FILE: report,
            }
        )
        env.update(spec.env)
        argv = network.wrap(index, (python, "-m", SHIM_MODULE, boot, *spec.args, *data_args))
        dirs.append(log_dir)
        hosts.append(
            HostCommand(
                index=index,
                address=address,
                instance_name=f"{job_id}-worker-{index}",
                argv=argv,
                env=dict(sorted(env.items())),
                cwd=code_dest,
                console_log=paths.console_log(index),
                report_file=report,
            )
        )
    request = LocalRequest(
        job_id=job_id,
        job_dir=job_dir,
        code_src=spec.code_dir,
        code_dest=code_dest,
        network=network.to_json(),
        hosts=tuple(hosts),
        files=files,
        dirs=tuple(dirs),
        auto_ports=tuple(auto),
        grace_period=spec.launcher.grace_period if spec.launcher.grace_period is not None else DEFAULT_GRACE_PERIOD,
    )
    return request, tuple(notes)
