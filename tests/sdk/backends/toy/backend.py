"""The toy backend: a job is a record in ``<home>/toy-jobs/<id>.json``; it "runs" by being recorded.

Submitting writes the record with the job's outcome (its ``MALAUNCH_TEST_SCENARIO``: an exit code, or ``run``);
each host's lines are ``[host H] step I of N`` for the ``toy.steps`` of the job; stopping a running job records
it STOPPED with 143. Every record is written atomically (:func:`malaunch.sdk.home.write_json_atomic`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional

from malaunch.sdk.backends.base import Backend, JobHandle
from malaunch.sdk.errors import JobNotFound
from malaunch.sdk.home import home_dir, write_json_atomic
from malaunch.sdk.plan import SubmitPlan
from malaunch.sdk.spec.model import JobSpec
from malaunch.sdk.status import JobState, JobStatus

from .ids import PREFIX
from .options import toy_options

__all__ = ["STOPPED_EXIT_CODE", "ToyBackend", "ToyRequest", "create_backend"]

STOPPED_EXIT_CODE = 143
_POLL = 0.05


@dataclass(frozen=True)
class ToyRequest:
    """What the toy records: where, how many hosts, how many lines each."""

    folder: str
    hosts: int
    steps: int

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data of the request."""
        return {"folder": self.folder, "hosts": self.hosts, "steps": self.steps}

    def render(self) -> str:
        """Human-readable text of the request."""
        return f"  toy: record in {self.folder}, {self.hosts} host(s) x {self.steps} step(s)"


class ToyBackend(Backend):
    """Records jobs in a folder of the SDK's home."""

    name = "toy"

    def __init__(self, home: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> None:
        self.home = home_dir(os.environ if environ is None else environ, home)
        self.folder = os.path.join(self.home, "toy-jobs")

    def new_job_id(self, spec: JobSpec, now: float) -> str:
        """``toy-`` and the usual id."""
        return PREFIX + super().new_job_id(spec, now)

    def plan(self, spec: JobSpec, *, job_id: str, now: float) -> SubmitPlan:
        request = ToyRequest(self.folder, spec.resources.hosts, toy_options(spec.sections).steps)
        return SubmitPlan(backend=self.name, job_id=job_id, created_at=now, spec=spec, request=request)

    def execute(self, plan: SubmitPlan) -> JobHandle:
        assert isinstance(plan.request, ToyRequest)
        scenario = plan.spec.env.get("MALAUNCH_TEST_SCENARIO", "0")
        record: Dict[str, Any] = {
            "id": plan.job_id, "name": plan.spec.name, "created_at": plan.created_at, "hosts": plan.request.hosts,
            "steps": plan.request.steps, "state": JobState.RUNNING.value, "exit_code": None, "ended_at": None,
        }  # fmt: skip
        if scenario != "run":
            code = int(scenario)
            state = JobState.SUCCEEDED if code == 0 else JobState.FAILED
            record.update(state=state.value, exit_code=code, ended_at=time.time())
        self.record(record)
        return JobHandle(self, plan.job_id)

    def record(self, record: Mapping[str, Any]) -> None:
        """Write one job's record (submit, stop; the conformance suite seeds old jobs with it)."""
        os.makedirs(self.folder, exist_ok=True)
        write_json_atomic(os.path.join(self.folder, f"{record['id']}.json"), dict(record))

    def _read(self, job_id: str) -> Dict[str, Any]:
        try:
            with open(os.path.join(self.folder, f"{os.path.basename(job_id)}.json"), encoding="utf-8") as handle:
                data: Dict[str, Any] = json.load(handle)
        except FileNotFoundError:
            raise JobNotFound(job_id, self.name, "see 'ma-submit list --backend toy'") from None
        return data

    def _status(self, record: Mapping[str, Any]) -> JobStatus:
        return JobStatus(
            id=record["id"], backend=self.name, state=JobState(record["state"]), exit_code=record["exit_code"],
            name=record["name"], created_at=record["created_at"], ended_at=record["ended_at"],
            location=os.path.join(self.folder, f"{record['id']}.json"),
        )  # fmt: skip

    def status(self, job_id: str) -> JobStatus:
        return self._status(self._read(job_id))

    def logs(self, job_id: str, *, follow: bool = False) -> Iterator[str]:
        record = self._read(job_id)
        for host in range(record["hosts"]):
            for step in range(record["steps"]):
                yield f"[host {host}] step {step} of {record['steps']}"
        while follow and not self.status(job_id).is_terminal:
            time.sleep(_POLL)  # a toy job writes all its lines at once: following waits for its end only

    def stop(self, job_id: str) -> JobStatus:
        record = self._read(job_id)
        if not JobState(record["state"]).is_terminal:
            record.update(state=JobState.STOPPED.value, exit_code=STOPPED_EXIT_CODE, ended_at=time.time())
            self.record(record)
        return self._status(record)

    def list(self) -> List[JobStatus]:
        names = sorted(os.listdir(self.folder)) if os.path.isdir(self.folder) else []
        found = [self.status(name[: -len(".json")]) for name in names if name.endswith(".json")]
        return sorted(found, key=lambda status: (status.created_at or 0.0, status.id), reverse=True)


def create_backend(**options: Any) -> ToyBackend:
    """The backend, as the registry opens it (``home=`` and ``environ=`` as ``ma-submit`` gives them)."""
    return ToyBackend(**options)
