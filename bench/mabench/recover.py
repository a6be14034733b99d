"""Time to recover (issue 39): a failure -> the first step of the next attempt, beside a cold start of the script.

Every figure runs ``workers/recover_worker.py`` (gloo, an all_reduce per step, ``checkpoint.progress``) on 2 hosts
x 1 rank, and ends at the first step of an attempt: the earliest ``first-<attempt>-<rank>`` stamp (the worker's
``time.time()`` right after its first all_reduce returned). Subjects:

- the shim through the local backend (2 emulated hosts, their own shims and the job's coordinator; back-off 0),
  with the fan-out (``run_method: ranktable``) and with torchrun. One job per repetition: **cold start** is
  ``ma-submit --detach`` called -> attempt 0's first step; **rank killed** is host 1's rank SIGKILLed (by the
  bench, its clock read right before) -> attempt 1's first step; **host lost** is host 1's shim and everything
  under it SIGKILLed (a pod that dies; the local backend starts a new shim for it after its
  ``REPLACE_AFTER`` of 1 s, as a platform replaces a pod) -> attempt 2's first step. Host 0's ``recovery.json``
  gives each recovery's phases too (failure seen, last rank gone, next attempt started, first progress).
- torchrun's own agents: two ``torchrun --nnodes=2 --rdzv-backend=c10d --max-restarts=1`` on 127.0.0.1;
  **cold start** is the two agents' Popen -> the first step; **rank killed** is the rank of agent 1 SIGKILLed ->
  the first step of the agents' restart. Twice: with torch's defaults, and with
  ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``. By default the workers of every round share one store, the one the
  rank-0 agent created for the first round (torch 2.13's ``DynamicRendezvousHandler.next_rendezvous`` creates it
  only once, and the workers' keys carry no round), so a restarted worker's gloo ``connectFullMesh`` can read its
  peer's address of the round before, before the new peer has written its own, and is refused; each agent then
  spends its restart on that, and with ``--max-restarts=1`` the job ends (pytorch/pytorch#135712 describes the
  same store shared across restarts for NCCL). Or the restarted workers wait in ``init_process_group``, both
  connected to that store, and no first step comes (seen here too; the agents stay up). With the variable set,
  each round's rank 0 worker hosts a fresh store on a new port: that is the configuration in which torch's agents
  recover, and the one the shim is compared with. A run one of whose agents exits before the restart's first step
  fails at once with the first refusal they logged; with the defaults a restart gets ``_DEFAULTS_WAIT`` (a few
  times what the store-per-round agents take at a load of 20) before it counts as failed.

The goal (issue 39): a recovery takes no more than the cold start plus the back-off (0 here) plus 1 s. A host lost
also waits for the platform's replacement (1 s locally), which the targets add.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set

from malaunch.entrypoint.public import (
    PROGRESS_DIR_NAME,
    descendants,
    env_has,
    read_environ,
    read_progress,
    read_recovery,
    recovery_file,
)

from .procs import (
    PYTHON,
    WORKERS,
    BenchError,
    Run,
    bench_env,
    free_port,
    kill_marked,
    new_mark,
    scratch_dir,
    start,
    tail,
)
from .results import CaseResult, Series, Target, fmt_ratio, fmt_value, say

__all__ = ["METHODS", "recover_section", "run_recover"]

METHODS = ("ranktable", "torchrun")
WORKER = WORKERS / "recover_worker.py"
REPLACE_AFTER = 1.0  # the local backend's replacement of a killed host (sdk/backends/local/runner.py)
_WAIT = 240.0
_DEFAULTS_WAIT = 120.0  # torch's defaults: their restart's workers may wait in init_process_group for ever
_SUBJECTS = {"ranktable": "shim, fan-out (ranktable)", "torchrun": "shim, torchrun",
             "c10d": "torchrun agents, c10d (torch's defaults)",
             "c10d-fresh": "torchrun agents, c10d, a store per round (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1)"}
_FRESH_STORE = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
#: What a restarted worker logs when gloo could not reach its peer (the first such line is the failure's evidence).
_REFUSED = ("connectFullMesh failed", "Connection refused", "RendezvousClosedError")
_PHASES = ("last_rank_gone_after", "next_started_after", "first_progress_after")


class _Stamps:
    """The workers' stamps in ``out``: which processes started (``pid-<pid>``, their rank) and made a first step
    (``first-<pid>``, its time); each attempt's are those of the processes not seen before."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.seen: Set[int] = set()

    def _pids(self, prefix: str) -> Dict[int, str]:
        found = {}
        for path in self.out.glob(f"{prefix}-*"):
            if path.suffix != ".tmp" and path.name[len(prefix) + 1 :].isdigit():
                found[int(path.name[len(prefix) + 1 :])] = path.read_text()
        return found

    def first_step(self, ranks: int = 2, within: float = _WAIT,
                   gone: Callable[[], Optional[str]] = lambda: None) -> float:  # fmt: skip
        """The earliest first step of the new attempt, once ``ranks`` new processes made one; they are seen then.
        ``gone`` says why no first step can come any more (the launchers exited), or None."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            found = {pid: text for pid, text in self._pids("first").items() if pid not in self.seen}
            if len(found) >= ranks:
                self.seen.update(found)
                return min(float(text) for text in found.values())
            why = gone()
            if why is not None:
                raise BenchError(f"{why}; no attempt made a first step on {ranks} new ranks\n(stamps in {self.out})")
            time.sleep(0.02)
        raise BenchError(f"no attempt made a first step on {ranks} new ranks within {within:.0f} s\n(stamps in "
                         f"{self.out})")  # the first line is the one the report keeps

    def rank(self, rank: int) -> int:
        """The pid of ``rank`` in the attempt whose first step was the last seen."""
        found = [pid for pid, text in self._pids("pid").items() if pid in self.seen and text == str(rank)]
        if not found:
            raise BenchError(f"rank {rank} has no process in the running attempt\n(stamps in {self.out})")
        return max(found, key=lambda pid: os.stat(self.out / f"pid-{pid}").st_mtime)


def _ma_submit(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> str:
    import subprocess

    script = Path(PYTHON).parent / "ma-submit"
    done = subprocess.run([str(script), *args], env=dict(env), cwd=str(cwd), capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
    if done.returncode != 0:
        raise BenchError(f"ma-submit {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done.stdout.strip()


def _kill_host(job_dir: Path, job_id: str, host: int) -> float:
    """SIGKILL host ``host``'s shim and everything under it (each proven the job's); the time right before."""
    state = json.loads((job_dir / "state.json").read_text())
    root = state["hosts"][host]["pid"]
    pids = [root] + [info.pid for info in descendants(root)]
    pids = [pid for pid in pids if env_has(read_environ(pid) or b"", "MALAUNCH_JOB_ID", job_id)]
    when = time.time()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return when


def _shim_once(method: str) -> Dict[str, float]:
    """One job of the shim with ``method``: its cold start, a rank killed, a host lost (seconds), and the phases."""
    scratch = scratch_dir(f"recover-{method}")
    out = scratch / "out"
    out.mkdir()
    code = scratch / "code"
    code.mkdir()
    shutil.copy(WORKER, code / "train.py")
    job = scratch / "job.yaml"
    job.write_text(json.dumps({
        "name": "recover", "run_method": method, "code_dir": str(code), "boot_file": "train.py",
        "resources": {"hosts": 2, "devices_per_host": 1},
        "env": {"BENCH_OUT": str(out), "OMP_NUM_THREADS": "1", "MALAUNCH_RESTART_BACKOFF": "0"},
        "launcher": {"max_restarts": 2, "grace_period": 3, "heartbeat_timeout": 5, "host_wait": 120},
    }))  # fmt: skip
    mark = new_mark()
    env = bench_env(mark, {"MALAUNCH_HOME": str(scratch / "home")})
    job_id = ""
    try:
        stamps = _Stamps(out)
        began = time.time()
        job_id = _ma_submit(["--detach", str(job)], env, scratch)
        figures = {"cold": stamps.first_step() - began}
        victim = stamps.rank(1)
        killed = time.time()
        os.kill(victim, signal.SIGKILL)
        figures["rank"] = stamps.first_step() - killed
        job_dir = scratch / "home" / "jobs" / job_id
        lost = _kill_host(job_dir, job_id, 1)
        figures["host"] = stamps.first_step() - lost
        records = read_recovery(recovery_file(str(job_dir / "hosts" / "0" / "logs")))
        ranks = [item for host in (0, 1) for item in read_progress(str(job_dir / "hosts" / str(host) / "logs" /
                                                                         PROGRESS_DIR_NAME))]  # fmt: skip
        for record in records:
            if record.first_progress is None and record.next_started is not None:  # the shim notes it at the end
                record = record._replace(first_progress=record.first_progress_in(ranks))
            data = record.to_json()
            for phase in _PHASES:
                if data.get(phase) is not None:
                    figures[f"{phase}-{record.attempt}"] = float(data[phase])
        return figures
    except BenchError as error:
        logs = scratch / "home" / "jobs" / job_id / "hosts" / "0" / "console.log" if job_id else scratch
        raise BenchError(f"{_SUBJECTS[method]}: {error}\nhost 0's console ends with:\n{tail(logs)}") from None
    finally:
        if job_id:
            import contextlib

            with contextlib.suppress(BenchError):
                _ma_submit(["stop", job_id], env, scratch)
        kill_marked(mark)
        shutil.rmtree(scratch, ignore_errors=True)


def agents_gone(runs: Sequence[Run], logs: Sequence[Path]) -> Callable[[], Optional[str]]:
    """For :meth:`_Stamps.first_step`: once an agent has exited (with --nnodes=2 the others can only wait for it),
    which and their exit codes, with the first line of their logs that says why a restarted worker could not start
    (gloo refused, the rendezvous closed)."""

    def why() -> Optional[str]:
        codes = [run.proc.poll() for run in runs]
        exited = [(index, code) for index, code in enumerate(codes) if code is not None]
        if not exited:
            return None
        if len(exited) == len(codes):
            said = f"every agent exited (codes {', '.join(str(code) for code in codes)})"
        else:
            said = "; ".join(f"agent {index} exited (code {code})" for index, code in exited) + ", the other waits"
        texts = [tail(log, lines=400).splitlines() for log in logs]
        for word in _REFUSED:  # the most telling first
            for index, lines in enumerate(texts):
                for line in lines:
                    if word in line:
                        return f"{said}; agent {index} logged: {line.strip()[:300]}"
        return said

    return why


def _agents_once(who: str = "c10d") -> Dict[str, float]:
    """torchrun's own agents (c10d, --max-restarts=1; ``c10d-fresh``: a store per round): the cold start and a rank
    killed (seconds)."""
    scratch = scratch_dir(f"recover-{who}")
    out = scratch / "out"
    out.mkdir()
    mark = new_mark()
    port = free_port()
    env = bench_env(mark, {"BENCH_OUT": str(out), "OMP_NUM_THREADS": "1",
                           **(_FRESH_STORE if who == "c10d-fresh" else {})})  # fmt: skip
    runs: List[Run] = []
    logs = [scratch / f"agent-{agent}.txt" for agent in (0, 1)]
    try:
        stamps = _Stamps(out)
        began = time.time()
        for agent in (0, 1):
            argv = [PYTHON, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                    f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=bench", "--max-restarts=1", str(WORKER)]
            runs.append(start(f"torchrun agent {agent}", argv, env, scratch, stderr=logs[agent]))
        gone = agents_gone(runs, logs)
        figures = {"cold": stamps.first_step(gone=gone) - began}
        victim = stamps.rank(1)
        killed = time.time()
        os.kill(victim, signal.SIGKILL)
        figures["rank"] = stamps.first_step(within=_DEFAULTS_WAIT if who == "c10d" else _WAIT, gone=gone) - killed
        return figures
    except BenchError as error:
        raise BenchError(f"{_SUBJECTS[who]}: {error}\nagent 1 ends with:\n{tail(logs[1])}") from None
    finally:
        for run in runs:
            run.cleanup()
        kill_marked(mark)
        shutil.rmtree(scratch, ignore_errors=True)


def run_recover(reps: int) -> CaseResult:
    """Every subject ``reps`` times, interleaved; the series, the targets and the phases of the shim's recoveries."""
    keys = {"ranktable": ("cold", "rank", "host"), "torchrun": ("cold", "rank", "host"), "c10d": ("cold", "rank"),
            "c10d-fresh": ("cold", "rank")}
    names = {"cold": "cold start: start -> first step", "rank": "rank killed -> first step of the next attempt",
             "host": "host lost -> first step of the next attempt (with 1 s replacement)"}  # fmt: skip
    series = {(who, key): Series(f"recover/{who}/{key}", "recover", _SUBJECTS[who], names[key], "s")
              for who, wanted in keys.items() for key in wanted}  # fmt: skip
    phases: Dict[str, List[float]] = {}
    failed: Dict[str, List[str]] = {who: [] for who in keys}
    for rep in range(reps):
        order = ("ranktable", "torchrun", "c10d-fresh", "c10d")
        for who in order if rep % 2 == 0 else order[::-1]:
            say(f"  recover rep {rep + 1}/{reps} {_SUBJECTS[who]}: running")
            try:
                figures = _agents_once(who) if who.startswith("c10d") else _shim_once(who)
            except BenchError as exc:  # said, counted, and the next repetition tries again
                failed[who].append(str(exc).splitlines()[0])
                say(f"  recover rep {rep + 1}/{reps} {_SUBJECTS[who]}: FAILED: {exc}")
                continue
            for key in keys[who]:
                series[(who, key)].samples.append(figures[key])
            for name, value in figures.items():
                if name not in keys[who]:
                    phases.setdefault(f"{who}:{name}", []).append(value)
            said = ", ".join(f"{key} {fmt_value(figures[key], 's')}" for key in keys[who])
            say(f"  recover rep {rep + 1}/{reps} {_SUBJECTS[who]}: {said}")
    for who, reasons in failed.items():
        for key in keys[who]:
            if reasons and not series[(who, key)].samples:
                series[(who, key)].error = reasons[0]
            elif reasons:
                series[(who, key)].note = f"{len(reasons)} of {reps} runs failed: {reasons[0]}"
    result = CaseResult("recover", list(series.values()), _targets(series))
    result.notes.append(
        "2 hosts x 1 rank, gloo; the shim through the local backend (back-off 0, its coordinator), torchrun's agents "
        "with c10d on 127.0.0.1 and --max-restarts=1, with torch's defaults and with a store per round "
        "(TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1); every figure ends at the earliest first-step stamp of the attempt"
    )
    for who, reasons in failed.items():
        if reasons:
            result.notes.append(f"{_SUBJECTS[who]}: {len(reasons)} of {reps} runs failed: {reasons[0]}")
    words = {"last_rank_gone_after": "last rank gone", "next_started_after": "next attempt started",
             "first_progress_after": "its first progress"}  # fmt: skip
    for who in ("ranktable", "torchrun"):
        for attempt, fault in ((0, "rank killed"), (1, "host lost")):
            said = [f"{words[phase]} {fmt_value(statistics.median(phases[name]), 's')}" for phase in _PHASES
                    if (name := f"{who}:{phase}-{attempt}") in phases]  # fmt: skip
            if said:
                result.notes.append(f"{_SUBJECTS[who]}, {fault}, host 0's recovery record (medians, after the "
                                    f"failure was seen): {', '.join(said)}")  # fmt: skip
    return result


def _median(series: Series) -> Optional[float]:
    return series.median


def _targets(series: Mapping[tuple, Series]) -> List[Target]:  # type: ignore[type-arg]
    out: List[Target] = []
    for who in ("ranktable", "torchrun"):
        cold = _median(series[(who, "cold")])
        for key, extra in (("rank", 0.0), ("host", REPLACE_AFTER)):
            got = _median(series[(who, key)])
            claim = (f"{_SUBJECTS[who]}: {'rank killed' if key == 'rank' else 'host lost'} recovers within cold "
                     f"start + back-off (0) + 1 s{' + the 1 s replacement' if extra else ''}")  # fmt: skip
            if cold is None or got is None:
                out.append(Target(claim, "not measured", None))
                continue
            limit = cold + 1.0 + extra
            out.append(Target(claim, f"{fmt_value(got, 's')} vs {fmt_value(limit, 's')} ({fmt_ratio(got / cold)} "
                                     "the cold start)", got <= limit))  # fmt: skip
    ours, theirs = _median(series[("torchrun", "rank")]), _median(series[("c10d-fresh", "rank")])
    claim = "shim, torchrun: rank killed recovers faster than torchrun's own agents (c10d, a store per round)"
    if ours is None or theirs is None:
        out.append(Target(claim, "not measured", None))
    else:
        out.append(Target(claim, f"{fmt_ratio(ours / theirs)} ({fmt_value(ours, 's')} vs {fmt_value(theirs, 's')})",
                          ours < theirs))  # fmt: skip
    return out


def recover_section(result: CaseResult, command: str, started: object, minutes: float,
                    facts: Mapping[str, str]) -> str:  # fmt: skip
    """The case's section of docs/performance.md: one row per subject, each figure and its ratio to the cold
    start of the same subject, the targets, how it was measured."""
    import datetime

    from .results import section_head

    assert isinstance(started, datetime.datetime)
    out = section_head("Time to recover: a failure to the first step of the next attempt", result, command, started,
                       minutes, dict(facts))  # fmt: skip
    out += ["| Subject | cold start | rank killed | vs cold | host lost | vs cold | Runs |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    by_subject: Dict[str, Dict[str, Series]] = {}
    for item in result.series:
        by_subject.setdefault(item.subject, {})[item.key.rsplit("/", 1)[1]] = item
    for subject, found in by_subject.items():
        cold = found["cold"].median
        cells = [subject, fmt_value(cold, "s") if cold is not None else (found["cold"].error or "no data")]
        for key in ("rank", "host"):
            item = found.get(key)
            value = item.median if item is not None else None
            cells.append("-" if item is None else fmt_value(value, "s") if value is not None else "no data")
            cells.append(fmt_ratio(value / cold) if value is not None and cold else "-")
        cells.append(str(max(len(item.samples) for item in found.values())))
        out.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    out += ["", "| Target | Measured | Verdict |", "|---|---|---|"]
    out += [f"| {t.claim} | {t.measured} | **{t.verdict}** |" for t in result.targets]
    out += ["", "How it was measured:", "", *[f"- {note}" for note in result.notes], ""]
    out += ["What the figures mean:", "", *[f"- {text}" for text in _MEANING]]
    return "\n".join(out)


_MEANING = [
    "**Cold start** is what any start of the script pays: the shim (or the agents) starting, the interpreter "
    "importing torch, the rendezvous and the first all_reduce. A restart pays it again: each attempt's ranks are "
    "new processes (the shim restarts the whole group; torchrun's agents restart every worker).",
    "**Rank killed**: the shim sees the rank's death at once (its exit, or the launcher's worker watch), ends the "
    "attempt on every host through the coordinator, and starts the next one as soon as every host's account is "
    "in (back-off 0 here). The phases above say where the time goes: the shim's own part is the failure seen to "
    "the next attempt started; the rest is the new attempt's own start. With torchrun that start is two "
    "interpreters importing torch one after the other (torchrun's agent, then, after its rendezvous, the "
    "worker), as in a cold start, which pays ma-submit's and the shim's start on top: so the recovery stays "
    "under the cold start by about that much, a margin that the spread of torch's import time under load can "
    "swallow (docs/recovery.md, 'Time to recover', has the breakdown).",
    "**Host lost**: the coordinator reads the end of the dead shim's connection at once; the next attempt waits "
    "for the host's replacement (the local backend's 1 s, a platform's pod start elsewhere) and its shim's join.",
    "**torchrun's agents** notice the death at their next monitor tick (or, on the other agent, the new round "
    "waiting), tear their workers down and join a new c10d rendezvous round before the workers start again. The "
    "agents themselves stay up: a restart skips their own start (an interpreter importing torch.distributed.run, "
    "the first rendezvous), about half of a start here. The shim with torchrun starts one torchrun per attempt "
    "(every host's, with its own rendezvous), so its recovery pays that start again: where it is slower than the "
    "agents, that is the difference (the record's phases show the shim's own part, the failure seen to the next "
    "attempt started, in well under a second).",
    "**torch's defaults** share one store between the rendezvous and every round's workers (the rank-0 agent "
    "creates it for the first round and keeps it), and the workers' keys carry no round: a restarted worker's gloo "
    "connectFullMesh can read its peer's address of the round before and be refused (`Connection refused`, logged "
    "by both restarted workers), which spends each agent's restart, and with --max-restarts=1 the job ends "
    "(the agents exit: RendezvousClosedError, ChildFailedError); or both restarted workers wait in "
    "init_process_group, connected to that store, with no first step (the agents stay up). It is a race between "
    "the two new workers' writes and reads of their keys, so it comes and goes with the load. "
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 gives each round's workers a store of their own (rank 0 hosts it on a "
    "new port), which is what the shim is compared with.",
    "On a machine as loaded as the load averages above say (2 cores shared with other work), every figure is "
    "several times a quiet machine's; the ratios, measured in the same run, hold better.",
]
