"""Word of a job's events to the targets of ``MALAUNCH_NOTIFY``: webhooks (signed JSON) and commands.

Host 0's shim (the one of a one-host job too) is the one that sends: it sees every attempt's end and the job's end
first-hand, so nothing is sent twice. ``MALAUNCH_NOTIFY`` is JSON written by the SDK (``docs/entrypoint.md``)::

    {"job": {"id": "...", "name": "...", "backend": "local"}, "timeout": 10,
     "targets": [{"url": "https://...", "secret_env": "<NAME>", "events": ["failed", "succeeded"]},
                 {"command": ["notify-send", "job"], "events": ["failed"]}]}

Contract:

1. Events: ``succeeded``, ``failed``, ``stopped`` (the job's end), ``restarted`` (an attempt failed and the group
   starts again), ``hung`` (an attempt ended as hung), ``host_lost`` and ``host_back`` (a host of a multi-host job
   lost, or joined again, as host 0's coordinator saw it: :func:`host_event`). A target gets only the events it
   lists.
2. The payload (:func:`payload`) is one JSON object: ``version``, ``event``, ``job`` (id, name, backend),
   ``attempt``, ``time`` (UTC, ISO 8601), ``text`` (one line: a Slack or Teams incoming webhook shows it as is),
   ``exit_code`` at the end, and ``cause`` (host, address, rank, name, exit_code, signal, class) when something failed.
3. A webhook gets it POSTed with ``X-Malaunch-Signature: sha256=<hex>``, the HMAC-SHA256 of the body with the
   value of the variable ``secret_env`` names (:func:`sign`); the secret is never printed. A command gets it on
   stdin and in ``MALAUNCH_EVENT`` / ``MALAUNCH_EVENT_JSON`` (its argv is run as is, no shell).
4. Delivery never harms the job: each event is sent in a thread of its own (a target gets its events in order),
   retried with back-off (0.5 s,
   doubling) on a connection error, an HTTP 5xx or 429, or a command's non-zero exit, within ``timeout`` seconds
   in all; the job's end waits for its sends at most ``timeout`` seconds. A target that fails is said once, with
   its reason; the job's outcome and exit code never change.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

if TYPE_CHECKING:
    from ..plan.launch_plan import LaunchPlan
    from .attempts import Attempt, RestartOutcome

__all__ = [
    "DEFAULT_EVENTS",
    "DEFAULT_NOTIFY_EVENTS",
    "DEFAULT_NOTIFY_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "EVENTS",
    "NOTIFY_EVENTS",
    "NOTIFY_VAR",
    "SIGNATURE_HEADER",
    "Notifier",
    "attempt_over",
    "install",
    "job_over",
    "notify_payload",
    "parse_notify",
    "payload",
    "sign",
    "target_label",
]

NOTIFY_VAR = "MALAUNCH_NOTIFY"
EVENTS = ("succeeded", "failed", "restarted", "hung", "host_lost", "host_back", "stopped")
DEFAULT_EVENTS = ("failed", "succeeded")
DEFAULT_TIMEOUT = 10.0
SIGNATURE_HEADER = "X-Malaunch-Signature"
#: The names the SDK sees them by (through ``malaunch.entrypoint.public``).
NOTIFY_EVENTS, DEFAULT_NOTIFY_EVENTS, DEFAULT_NOTIFY_TIMEOUT = EVENTS, DEFAULT_EVENTS, DEFAULT_TIMEOUT
_FIRST_PAUSE = 0.5
_VERSION = 1


def sign(secret: bytes, body: bytes) -> str:
    """The signature header's value: ``sha256=`` and the HMAC-SHA256 of ``body`` with ``secret``, in hex."""
    import hashlib
    import hmac

    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def target_label(target: Mapping[str, Any]) -> str:
    """A target as it may be shown: a URL's scheme and host only (its path may hold a token), a command's name."""
    url = target.get("url")
    if isinstance(url, str):
        import urllib.parse

        parts = urllib.parse.urlsplit(url)
        return f"{parts.scheme}://{parts.hostname or '?'}{f':{parts.port}' if parts.port else ''}/..."
    command = target.get("command")
    return f"command {command[0]}" if isinstance(command, list) and command else "target"


def _cause_text(cause: Mapping[str, Any]) -> str:
    rank, host, code, signum = cause.get("rank"), cause.get("host"), cause.get("exit_code"), cause.get("signal")
    name = cause.get("name")
    named = f"process {name}" if isinstance(name, str) and name else "the shim"
    who = f"rank {rank}" if isinstance(rank, int) else named
    where = f" on host {host}" if isinstance(host, int) else ""
    if isinstance(code, int):
        what = f"exited with {code}"
    elif isinstance(signum, int):
        what = f"was ended by signal {signum}"
    else:
        what = "failed"
    kind = cause.get("class")
    return f"{who}{where} {what}" + (f" ({kind})" if kind else "")


def payload(event: str, job: Mapping[str, Any], attempt: int, *, cause: Optional[Mapping[str, Any]] = None,
            exit_code: Optional[int] = None, now: Optional[float] = None,
            detail: Optional[str] = None) -> Dict[str, Any]:  # fmt: skip
    """The JSON object sent for ``event`` (see the module's docstring); pure given ``now``. ``detail`` says what
    happened in the text in place of the cause (a host lost or back)."""
    when = time.time() if now is None else now
    name = job.get("name") or job.get("id")
    said = {"succeeded": "succeeded", "failed": "failed", "stopped": "was stopped", "hung": "hung",
            "restarted": "failed and restarts", "host_lost": "lost a host", "host_back": "has a host back"}  # fmt: skip
    text = f"malaunch job {name} ({job.get('backend')}) {said.get(event, event)}, attempt {attempt}"
    if detail:
        text += f": {detail}"
    elif cause:
        text += f": {_cause_text(cause)}"
    if exit_code is not None and event in ("failed", "stopped"):
        text += f"; exit code {exit_code}"
    text += f" [{job.get('id')}]"
    data: Dict[str, Any] = {"version": _VERSION, "event": event, "job": dict(job), "attempt": attempt,
                            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)), "text": text}  # fmt: skip
    if exit_code is not None:
        data["exit_code"] = exit_code
    if cause:
        data["cause"] = {key: value for key, value in cause.items() if value is not None}
    return data


notify_payload = payload


def parse_notify(text: str) -> Tuple[Dict[str, Any], float, List[Dict[str, Any]]]:
    """``MALAUNCH_NOTIFY``'s job, timeout and targets. Raises ValueError naming what is wrong."""
    import json
    import urllib.parse

    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("targets"), list):
        raise ValueError("must be a JSON object with a targets list")
    job: Dict[str, Any] = data["job"] if isinstance(data.get("job"), dict) else {}
    timeout = data.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise ValueError(f"timeout must be seconds from 0 to 3600, got {timeout!r}")
    targets: List[Dict[str, Any]] = []
    for index, target in enumerate(data["targets"]):
        url, command = (target.get("url"), target.get("command")) if isinstance(target, dict) else (None, None)
        if isinstance(url, str) == (isinstance(command, list) and bool(command)):
            raise ValueError(f"targets[{index}] must have a url or a command (an argv list), not both")
        if isinstance(url, str) and urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"targets[{index}].url must be http(s)")
        events = target.get("events", list(DEFAULT_EVENTS))
        if not isinstance(events, list) or any(event not in EVENTS for event in events):
            raise ValueError(f"targets[{index}].events must be a list of {', '.join(EVENTS)}")
        targets.append(dict(target, events=events))
    return job, float(timeout), targets


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
        import json

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
        import signal

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
                 f"({why}); the job goes on")  # fmt: skip

    def _once(self, target: Mapping[str, Any], event: str, body: bytes, deadline: float) -> Tuple[bool, str]:
        """One try: ``(retry?, why it failed)``; ``why`` empty when delivered."""
        import subprocess

        left = max(0.05, deadline - time.monotonic())
        if "url" in target:
            return self._post(target, event, body, left)
        env = {key: value for key, value in self.environ.items() if key != "MALAUNCH_JOB_SECRET"}
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

    def _post(self, target: Mapping[str, Any], event: str, body: bytes, left: float) -> Tuple[bool, str]:
        import urllib.error
        import urllib.request

        headers = {"Content-Type": "application/json", "User-Agent": "malaunch", "X-Malaunch-Event": event}
        secret_env = target.get("secret_env")
        if isinstance(secret_env, str):
            secret = self.environ.get(secret_env)
            if not secret:
                return False, f"its secret variable {secret_env} is not set on host {self.host}"
            headers[SIGNATURE_HEADER] = sign(secret.encode("utf-8"), body)
        request = urllib.request.Request(str(target["url"]), data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=left) as answer:  # http(s) only: checked at parse
                answer.read(1024)
                return False, ""
        except urllib.error.HTTPError as error:
            return error.code >= 500 or error.code == 429, f"HTTP {error.code}"
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            return True, f"{type(reason).__name__}: {reason}" if not isinstance(reason, str) else reason


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
