"""Sending a job's events to the targets of ``MALAUNCH_NOTIFY`` (:mod:`.notify`: what is sent, and the contract).

Host 0's shim installs the one :class:`Notifier` (:func:`install`); the attempt loops and the coordinator's book
call :func:`attempt_over`, :func:`host_event` and :func:`job_over`. Each event goes out in a thread of its own. A
command target is run as is; a webhook is POSTed by :mod:`.webhook`, a program of its own, so the shim never loads
an HTTP client (``urllib.request`` with the ``http.client``, ``email`` and ``ssl`` it imports: about 17 ms of every
start, docs/performance.md).
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..contract.variables import without_secret
from .notify import NOTIFY_VAR, parse_notify, payload, target_label
from .procs.bareboot import bare_argv

if TYPE_CHECKING:
    from ..plan.launch_plan import LaunchPlan
    from .attempts import Attempt, RestartOutcome

__all__ = ["Notifier", "attempt_over", "host_event", "install", "job_over", "webhook_argv"]

_FIRST_PAUSE = 0.5
def webhook_argv(headers: Mapping[str, str], timeout: float, secret_env: Optional[str] = None) -> List[str]:
    """The webhook program's command line: it POSTs the body on its stdin to the URL on the line before it, with
    ``headers`` within ``timeout`` s, signed with the value of the variable ``secret_env`` names (its environment's).
    Neither the URL (its path may be a token) nor the secret is on a command line, which any user may read. It
    starts as the watchdog starts (:mod:`.procs.bareboot`): a bare interpreter that runs :func:`.webhook.main`,
    whose one line on stdout is the verdict."""
    signed = [secret_env] if secret_env else []
    return bare_argv("run.webhook", [json.dumps(dict(headers)), f"{timeout:.3f}", *signed])


class Notifier:
    """Sends events to the targets (see the module's docstring); ``say`` writes the shim's own lines."""

    def __init__(self, job: Mapping[str, Any], timeout: float, targets: Sequence[Mapping[str, Any]],
                 environ: Mapping[str, str], say: Callable[[str], None], host: int = 0) -> None:  # fmt: skip
        self.job, self.timeout, self.targets = dict(job), timeout, list(targets)
        self.environ, self.say, self.host = environ, say, host
        self.threads: List[threading.Thread] = []
        self.failed: Set[int] = set()  # targets already said to have failed (once each)
        self.sent: Set[Tuple[str, int, int]] = set()  # (event, attempt, host or -1): never twice
        self.last: Dict[int, threading.Thread] = {}  # each target's latest send
        self.jobs: Dict[threading.Thread, Tuple[int, Mapping[str, Any], str]] = {}  # a send: target, event
        self.lock = threading.Lock()

    def send(self, event: str, attempt: int, cause: Optional[Mapping[str, Any]] = None,
             exit_code: Optional[int] = None, detail: Optional[str] = None, key: int = -1) -> None:  # fmt: skip
        """Send ``event`` to every target that wants it, in the background (once per event, attempt and ``key``:
        the host a host event is about)."""
        with self.lock:
            if (event, attempt, key) in self.sent:
                return
            self.sent.add((event, attempt, key))

        data = payload(event, self.job, attempt, cause=cause, exit_code=exit_code, detail=detail)
        body = json.dumps(data, sort_keys=True).encode("utf-8")
        deadline = time.monotonic() + self.timeout
        for index, target in enumerate(self.targets):
            if event in target["events"]:
                before = self.last.get(index)  # a target gets its events in order: this one after the one before
                thread = threading.Thread(target=self._deliver, args=(index, target, event, body, deadline, before),
                                          name="malaunch-notify", daemon=True)  # fmt: skip
                self.jobs[thread] = (index, target, event)
                thread.start()
                self.threads.append(thread)
                self.last[index] = thread

    def wait(self) -> None:
        """Wait for the sends still going, at most ``timeout`` seconds from now. A stop signal meanwhile (the
        platform ending the other hosts of a job that has ended) waits with them; a second one ends the wait."""

        deadline = time.monotonic() + self.timeout
        signals: List[int] = []
        previous: Dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                previous[int(stop)] = signal.signal(stop, lambda signum, _frame: signals.append(signum))
        try:
            while len(signals) < 2 and time.monotonic() < deadline and any(t.is_alive() for t in self.threads):
                for thread in self.threads:
                    thread.join(min(0.1, max(0.0, deadline - time.monotonic())))
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
        for thread in self.threads:
            if thread.is_alive():  # its target still has not answered: said now, the shim does not wait longer
                index, target, event = self.jobs[thread]
                self._give_up(index, target, event, "no answer")

    def _deliver(self, index: int, target: Mapping[str, Any], event: str, body: bytes, deadline: float,
                 before: Optional[threading.Thread]) -> None:  # fmt: skip
        if before is not None:
            before.join(max(0.0, deadline - time.monotonic()))
        pause, tries, why = _FIRST_PAUSE, 0, "no time left"
        while time.monotonic() < deadline:
            tries += 1
            try:
                again, why = self._once(target, event, body, deadline)
            except Exception as error:  # never the job's problem: said once below
                again, why = False, f"{type(error).__name__}: {error}"
            if why == "":
                return
            left = deadline - time.monotonic()
            if not again or left <= 0:
                break
            time.sleep(min(pause, left))
            pause *= 2
        self._give_up(index, target, event, why, tries)

    def _give_up(self, index: int, target: Mapping[str, Any], event: str, why: str, tries: int = 0) -> None:
        """Say once per target that it did not take an event, and why."""
        with self.lock:
            if index in self.failed:
                return
            self.failed.add(index)
        after = f" after {tries} tr{'y' if tries == 1 else 'ies'}" if tries else ""
        self.say(f"notify: {target_label(target)} did not take the {event} event{after} within {self.timeout:g}s "
                 f"({why}); the job goes on (try the target with 'ma-submit notify test JOB.yaml')")  # fmt: skip

    def _once(self, target: Mapping[str, Any], event: str, body: bytes, deadline: float) -> Tuple[bool, str]:
        """One try: ``(retry?, why it failed)``; ``why`` empty when delivered."""

        left = max(0.05, deadline - time.monotonic())
        if "url" in target:
            return self._post(target, event, body, left)
        env = dict(without_secret(self.environ))
        env.update(MALAUNCH_EVENT=event, MALAUNCH_EVENT_JSON=body.decode("utf-8"))
        try:
            done = subprocess.run(list(target["command"]), input=body, env=env, timeout=left, check=False,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        except subprocess.TimeoutExpired:
            return False, f"the command did not end within {self.timeout:g}s"
        except OSError as error:
            return False, f"cannot run it: {error.strerror or error}"
        if done.returncode == 0:
            return False, ""
        last = (done.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return True, f"exit {done.returncode}" + (f": {last[0][:160]}" if last[0] else "")

    def _webhook_env(self) -> Dict[str, str]:
        """The webhook program's environment: the shim's (its proxy and certificate settings), without the job's
        secret."""
        return dict(without_secret(self.environ))

    def _post(self, target: Mapping[str, Any], event: str, body: bytes, left: float) -> Tuple[bool, str]:
        headers = {"Content-Type": "application/json", "User-Agent": "malaunch", "X-Malaunch-Event": event}
        secret_env = target.get("secret_env")
        if isinstance(secret_env, str) and not self.environ.get(secret_env):
            return False, f"its secret variable {secret_env} is not set on host {self.host}"
        # the program signs the body (:mod:`.signature`): the shim never loads hashlib and hmac
        argv = webhook_argv(headers, left, secret_env if isinstance(secret_env, str) else None)
        line = str(target["url"]).encode("utf-8") + b"\n"  # one line: parse_notify refuses a URL with a control byte
        try:  # the program ends itself at its timeout; a second more for the interpreter to start and end
            done = subprocess.run(argv, input=line + body, timeout=left + 1.0, check=False, capture_output=True,
                                  env=self._webhook_env())  # fmt: skip
        except subprocess.TimeoutExpired:
            return True, "timed out"
        except OSError as error:
            return False, f"cannot start the webhook sender: {error.strerror or error}"
        verdict = done.stdout.decode("utf-8", "replace").strip()
        if done.returncode != 0 or not verdict:
            last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            return True, f"the webhook sender failed: {last[0][:160]}"
        again, _, why = verdict.partition(" ")
        return again == "retry", "" if again == "ok" else why


# -- the shim's one notifier: installed by main on host 0, used by the attempt loops ---------------------------------
_INSTALLED: List[Notifier] = []


def install(environ: Mapping[str, str], plan: LaunchPlan, say: Callable[[str], None]) -> None:
    """Make this shim the job's sender when ``MALAUNCH_NOTIFY`` is set and this is host 0; a value that cannot be
    read is said once and nothing is sent (the job runs as it would without)."""
    text = environ.get(NOTIFY_VAR)
    if not text or plan.node_rank != 0:
        return
    try:
        job, timeout, targets = parse_notify(text)
    except ValueError as error:
        say(f"{NOTIFY_VAR} cannot be read ({error}); no notifications are sent")
        return
    _INSTALLED[:] = [Notifier(job, timeout, targets, environ, say, plan.node_rank)]


def _own_cause(attempt: Attempt, host: int) -> Optional[Dict[str, Any]]:
    """An attempt's root cause: the job's as the coordinator chose it (several hosts), else this host's own."""
    chosen = attempt.cause
    if chosen is not None:
        return {"host": chosen.host, "address": chosen.addr or None, "rank": chosen.rank, "name": chosen.name or None,
                "exit_code": chosen.code, "signal": chosen.signal, "class": chosen.kind}  # fmt: skip
    failure = attempt.result.root_cause
    kind = attempt.classification.kind if attempt.classification is not None else None
    if failure is None:
        return {"host": host, "exit_code": attempt.result.exit_code, "class": kind}
    return {"host": host, "address": failure.host, "rank": failure.rank, "name": failure.name or None,
            "exit_code": failure.exit_code, "signal": failure.signal, "class": kind}  # fmt: skip


def attempt_over(attempts: Sequence[Attempt]) -> None:
    """The attempts so far (the last one just judged): ``hung`` for each that hung, ``restarted`` for each the
    group starts again after. A no-op unless :func:`install` made this shim the sender."""
    for notifier in _INSTALLED:
        for attempt in attempts:
            kind = attempt.classification.kind if attempt.classification is not None else None
            cause = _own_cause(attempt, notifier.host)
            if kind == "hang" or (attempt.cause is not None and attempt.cause.kind == "hang"):
                notifier.send("hung", attempt.index, cause)
            if attempt.restarted:
                notifier.send("restarted", attempt.index, cause)


def host_event(event: str, attempt: int, host: int, addr: str, detail: str) -> None:
    """A host of the job lost (``host_lost``) or joined again (``host_back``), as the coordinator's book on host 0
    saw it; ``detail`` says it in a line (``host 1 (10.0.0.2) lost: no heartbeat for 30 s``). Once per host and
    attempt. A no-op unless :func:`install` made this shim the sender."""
    for notifier in _INSTALLED:
        cause = {"host": host, "address": addr or None, "class": "host_lost" if event == "host_lost" else None}
        notifier.send(event, attempt, {key: value for key, value in cause.items() if value is not None},
                      detail=detail, key=host)  # fmt: skip


def job_over(outcome: RestartOutcome) -> None:
    """The job's end: ``succeeded``, ``failed`` or ``stopped`` (and any attempt not said yet), then wait for the
    sends, at most the timeout. A no-op unless :func:`install` made this shim the sender."""
    for notifier in _INSTALLED:
        attempt_over(outcome.attempts)
        result = outcome.result
        last = outcome.attempts[-1] if outcome.attempts else None
        index = last.index if last is not None else 0
        if result.shim_signal is not None:
            notifier.send("stopped", index, None, result.exit_code)
        elif result.exit_code == 0:
            notifier.send("succeeded", index, None, 0)
        else:
            cause: Dict[str, Any] = {"host": notifier.host}
            if last is not None:
                cause = _own_cause(last, notifier.host) or cause
            if outcome.job_class is not None:
                cause["class"] = outcome.job_class.kind
            if result.root_cause is not None and cause.get("exit_code") is None:
                cause["exit_code"] = result.root_cause.exit_code
            notifier.send("failed", index, cause, result.exit_code)
        notifier.wait()
