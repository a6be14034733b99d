"""The quick path of ``ma-submit`` (issue 28) changes nothing a user can see.

(a) For every form it recognises, in every option order, its parameters are those click's own parser gives the
real command; it declines every near-miss (click then answers, usage errors included). (b) Real ``ma-submit``
processes on real jobs (ended, failed, running, an unknown id, a damaged job folder): stdout, stderr and the
exit code are byte-identical through the quick path and through click alone.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import click
import pytest
from malaunch.sdk.backends.local.jobdir import job_processes
from malaunch.sdk.cli.app import cli
from malaunch.sdk.cli.quick import VERB_NAMES, may_run, recognise, verb_first
from malaunch.sdk.cli.verbs import VERBS
from pipeutil import into_a_pipe_that_fills_then_closes
from sdkutil import (
    REPO,
    VENV_BIN,
    assert_nothing_running,
    job_ids,
    ma_submit,
    wait_for,
    write_job,
)

#: Each verb's options as (words, ...) alternatives; a recognised form is the verb, its JOB_ID and any of them.
_OPTIONS: Dict[str, List[Tuple[str, ...]]] = {
    "status": [("--backend", "local"), ("--profile", "lab"), ("--output", "json")],
    "logs": [("--backend", "volcano"), ("--profile", "lab"), ("-f",), ("--tail", "3")],
    "stop": [("--backend", "modelarts"), ("--profile", "lab")],
    "list": [("--backend", "local"), ("--profile", "lab"), ("--output", "text"), ("--limit", "5")],
}


def _recognised_forms() -> List[List[str]]:
    """Every subset of each verb's options in every order, with the JOB_ID at every place among them."""
    forms: List[List[str]] = []
    for verb, options in _OPTIONS.items():
        for size in range(len(options) + 1):
            for chosen in itertools.permutations(options, size):
                words = [list(option) for option in chosen]
                places = range(len(words) + 1) if verb != "list" else [None]
                for place in places:
                    parts = [*words[:place], ["job-1"], *words[place:]] if place is not None else words
                    forms.append([verb, *[word for part in parts for word in part]])
    forms += [
        ["logs", "job-1", "--follow"], ["logs", "--tail", "0", "--follow", "job-1"], ["list", "--limit", "007"],
        ["status", "ns/name", "--output", "text"], ["logs", "job-1", "--tail", "12345678901234567890"],
        ["list", "--output", "json", "--backend", "modelarts"], ["status", "x", "--profile", "a=b"],
    ]  # fmt: skip
    return forms


NEAR_MISSES: List[List[str]] = [
    [], ["status"], ["status", "a", "b"], ["list", "extra"], ["stop"], ["logs"],
    ["status", "job-1", "--output=json"], ["list", "--limit=5"], ["status", "job-1", "--backend=local"],
    ["list", "--limit", "-1"], ["list", "--limit", "1.5"], ["list", "--limit", "+5"], ["list", "--limit", " 5"],
    ["list", "--limit", "\u0663"], ["list", "--limit"], ["logs", "job-1", "--tail"], ["logs", "job-1", "--tail", "x"],
    ["logs", "job-1", "-f", "-f"], ["logs", "job-1", "-f", "--follow"], ["logs", "job-1", "-ff"],
    ["stop", "--help"], ["stop", "job-1", "-h"], ["status", "--help"], ["list", "--help"], ["-h"], ["--help"],
    ["--version"], ["status", "--", "job-1"], ["status", "job-1", "--"], ["status", "-"], ["status", "-x"],
    ["status", ""], ["status", "job-1", "--backend", "LOCAL"], ["status", "job-1", "--backend", "nowhere"],
    ["status", "job-1", "--backend"], ["status", "job-1", "--output", "yaml"], ["status", "job-1", "--output"],
    ["status", "job-1", "--profile"], ["status", "job-1", "--profile", ""], ["status", "job-1", "--profile", "-p"],
    ["status", "job-1", "--backend", "local", "--backend", "local"], ["list", "--output", "json", "--output", "json"],
    ["status", "job-1", "--profile", "a", "--profile", "a"], ["stop", "job-1", "--output", "json"],
    ["stop", "job-1", "-f"], ["status", "job-1", "--tail", "1"], ["list", "--tail", "1"], ["logs", "j", "--limit", "1"],
    ["list", "--state", "running"], ["list", "--name", "x"], ["logs", "job-1", "--host", "0"],
    ["logs", "job-1", "--rank", "0"], ["wait", "job-1"], ["delete", "job-1"], ["prune"], ["events", "job-1"],
    ["STATUS", "job-1"], ["job.yaml"], ["./status"], ["--profile", "lab", "status", "job-1"],
    ["status", "job-1", "--out", "json"], ["status", "job-1", "--bac", "local"], ["list", "--limit", "5", "x"],
]  # fmt: skip


def _click_parse(args: Sequence[str]) -> Tuple[Dict[str, Any], Optional[str]]:
    """The parameters click's own parser gives the command ``args[0]`` for ``args[1:]``, and the profile named."""
    root = click.Context(cli, info_name="ma-submit", **cli.context_settings)
    command = cli.get_command(root, args[0])
    assert command is not None, args
    with command.make_context(args[0], list(args[1:]), parent=root) as ctx:
        profile = ctx.meta.get("malaunch.profile")
        return dict(ctx.params), profile if isinstance(profile, str) else None


@pytest.mark.parametrize("args", _recognised_forms(), ids=" ".join)
def test_a_recognised_form_parses_as_click_parses_it(args: List[str]) -> None:
    found = recognise(args)
    assert found is not None, args
    verb, params, profile = found
    assert verb == args[0]
    assert (params, profile) == _click_parse(args)


@pytest.mark.parametrize("args", NEAR_MISSES, ids=lambda args: " ".join(args) or "(none)")
def test_every_near_miss_is_declined(args: List[str]) -> None:
    assert recognise(args) is None


def test_shell_completion_is_left_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("_MA_SUBMIT_COMPLETE", raising=False)
    assert may_run()
    monkeypatch.setenv("_MA_SUBMIT_COMPLETE", "bash_complete")
    assert not may_run()


# --- (b) the same bytes through both paths, real processes -----------------------------------------------------

_CLICK_ONLY = "import sys\nfrom malaunch.sdk.cli.app import main\nmain(sys.argv[1:])\n"
Run = Tuple[int, str, str]


def _run(argv: List[str], env: Dict[str, str]) -> Run:
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, cwd=str(REPO)
    )
    return done.returncode, done.stdout, done.stderr


def _quick(args: List[str], env: Dict[str, str]) -> Run:
    assert recognise(args) is not None, args  # the console script takes the quick path for these
    return _run([os.path.join(VENV_BIN, "ma-submit"), *args], env)


def _through_click(args: List[str], env: Dict[str, str]) -> Run:
    return _run([sys.executable, "-c", _CLICK_ONLY, *args], env)


def _ages_hidden(run: Run) -> Run:
    """``run`` with every age and duration of a ``list`` table (``28s``, ``3m``, ``2h``) shown as ``<t>``, and each
    run of spaces as one (a column widens when an age grows a digit, ``9s`` to ``10s``: seen in a loaded run)."""
    code, out, err = run
    return code, re.sub(r" +", " ", re.sub(r"(?<= )\d+[smhd](?= |$)", "<t>", out, flags=re.M)), err


COLOURED = """
    import sys
    print("\\x1b[31mred\\x1b[0m and plain", flush=True)
    print("second line", flush=True)
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""
SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(600)\n"


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_the_verbs_print_the_same_bytes_and_exit_the_same_both_ways(
    cli_env: Dict[str, str], home: Path, tmp_path: Path
) -> None:
    assert ma_submit([str(write_job(tmp_path / "ok", COLOURED, name="ok"))], cli_env).returncode == 0
    (ended,) = job_ids(home)
    failing = write_job(tmp_path / "bad", COLOURED, name="bad", args=["3"])
    assert ma_submit([str(failing)], cli_env).returncode == 3
    (failed,) = [job for job in job_ids(home) if job != ended]
    damaged = "damaged-20260101-000000-abcdef"
    shutil.copytree(home / "jobs" / ended, home / "jobs" / damaged)
    (home / "jobs" / damaged / "state.json").write_text('{"job_id": "dama')
    cases = [
        ["status", ended], ["status", "--output", "json", ended], ["status", ended[:9], "--backend", "local"],
        ["status", failed], ["status", damaged], ["status", damaged, "--output", "json"], ["status", "nosuch-1"],
        ["status", "nosuch-1", "--output", "json"], ["status", ended, "--profile", "nosuch"],
        ["list"], ["list", "--output", "json"], ["list", "--limit", "1"], ["list", "--limit", "0", "--output", "json"],
        ["list", "--profile", "nosuch", "--output", "json"],
        ["logs", ended], ["logs", failed, "--tail", "2"], ["logs", "-f", ended], ["logs", ended, "--tail", "0"],
        ["logs", damaged], ["logs", "nosuch-1"],
        ["stop", ended], ["stop", failed, "--backend", "local"], ["stop", damaged], ["stop", "nosuch-1"],
    ]  # fmt: skip
    for args in cases:
        # the AGE column of `list` reads the clock: on a loaded machine three runs can span two of its ticks
        same = _ages_hidden if args[0] == "list" and "json" not in args else (lambda run: run)
        before, quick = same(_through_click(args, cli_env)), same(_quick(args, cli_env))
        after = same(_through_click(args, cli_env))
        assert quick in (before, after), (args, quick, before)
    shown = _quick(["logs", ended], cli_env)[1]
    assert "red and plain" in shown and "\x1b" not in shown  # escape codes dropped for a pipe, as click does
    ascii_env = {**cli_env, "PYTHONIOENCODING": "ascii"}  # click writes UTF-8 to an ASCII stream
    for args in (["status", "nosuch-\u00e9t\u00e9", "--output", "json"], ["stop", "caf\u00e9-1"]):
        quick = _quick(args, ascii_env)
        assert quick == _through_click(args, ascii_env) and "\u00e9" in quick[2], (args, quick)


def _into_a_closed_pipe(argv: List[str], env: Dict[str, str]) -> Tuple[int, str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # whoever read the output went away before the first line
    try:
        done = subprocess.run(argv, env=env, stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              text=True, timeout=120, cwd=str(REPO))  # fmt: skip
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_closed_pipe_ends_both_ways_alike(cli_env: Dict[str, str], home: Path, tmp_path: Path) -> None:
    assert ma_submit([str(write_job(tmp_path / "ok", COLOURED, name="ok"))], cli_env).returncode == 0
    (ended,) = job_ids(home)
    for args in (["status", ended], ["list", "--output", "json"], ["logs", ended]):
        assert recognise(args) is not None
        quick = _into_a_closed_pipe([os.path.join(VENV_BIN, "ma-submit"), *args], cli_env)
        through_click = _into_a_closed_pipe([sys.executable, "-c", _CLICK_ONLY, *args], cli_env)
        assert quick == through_click == (1, _lost(0, 0)), args


def _lost(sent: int, lines: int, why: str = "whoever read it closed the pipe",
          advice: str = "send it to a file to keep all of it") -> str:  # fmt: skip
    return (f"ma-submit: the output stopped after {sent:,} bytes ({lines:,} whole lines): {why}, and the rest was not "
            f"written; {advice}\n")


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_reader_that_leaves_midway_is_said_both_ways(cli_env: Dict[str, str], home: Path, tmp_path: Path) -> None:
    """More output than the pipe holds, and a reader that leaves once it is full: Python's own writer would have
    dropped the rest and ended 0 in silence; both paths end 1 and say after how many bytes and lines it stopped. Onto
    a full disk (``/dev/full``), both said nothing with a traceback; now the same line says why."""
    assert ma_submit([str(write_job(tmp_path / "ok", COLOURED, name="ok"))], cli_env).returncode == 0
    (ended,) = job_ids(home)
    for index in range(150):  # about 36 KB of JSON: more than the pipe (4 KiB) and Python's buffer (8 KiB)
        shutil.copytree(home / "jobs" / ended, home / "jobs" / f"{ended}-c{index:03d}")
    args = ["list", "--output", "json", "--limit", "0"]
    whole = ma_submit(args, cli_env)
    assert whole.returncode == 0 and len(whole.stdout) > 4 * 8192, whole.stderr
    for argv in ([os.path.join(VENV_BIN, "ma-submit"), *args], [sys.executable, "-c", _CLICK_ONLY, *args]):
        code, err, fitted = into_a_pipe_that_fills_then_closes(argv, cli_env)
        assert (code, err) == (1, _lost(fitted, whole.stdout[:fitted].count("\n"))), argv
        with open("/dev/full", "wb") as full:  # a full disk: said the same way, not a traceback
            done = subprocess.run(argv, env=cli_env, stdout=full, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                  text=True, timeout=120, cwd=str(REPO))  # fmt: skip
        assert (done.returncode, done.stderr) == (1, _lost(0, 0, "the write failed: No space left on device",
                                                           "free space or send it elsewhere")), argv  # fmt: skip
    # a verb only click runs (the plan of submit --dry-run), printed through the same echo
    big = write_job(tmp_path / "big", COLOURED, name="big", resources={"hosts": 4, "devices_per_host": 4})
    planned = [os.path.join(VENV_BIN, "ma-submit"), "--dry-run", "--output", "json", str(big)]
    whole = subprocess.run(planned, env=cli_env, capture_output=True, text=True, timeout=120, cwd=str(REPO))
    assert whole.returncode == 0 and len(whole.stdout) > 8192, whole.stderr
    code, err, fitted = into_a_pipe_that_fills_then_closes(planned, cli_env)
    assert (code, err) == (1, _lost(fitted, whole.stdout[:fitted].count("\n")))


@pytest.mark.process
def test_help_and_version_onto_a_full_disk_end_with_one_line_both_ways(cli_env: Dict[str, str]) -> None:
    # click writes these itself: a full disk there was a traceback on both paths
    line = "ma-submit: error: a write failed: No space left on device; free space or send the output elsewhere\n"
    for args in (["--help"], ["list", "--help"], ["--version"]):
        for argv in ([os.path.join(VENV_BIN, "ma-submit"), *args], [sys.executable, "-c", _CLICK_ONLY, *args]):
            with open("/dev/full", "wb") as full:
                done = subprocess.run(argv, env=cli_env, stdout=full, stderr=subprocess.PIPE,
                                      stdin=subprocess.DEVNULL, text=True, timeout=120, cwd=str(REPO))  # fmt: skip
                assert (done.returncode, done.stderr) == (1, line), argv
                both = subprocess.run(argv, env=cli_env, stdout=full, stderr=full, stdin=subprocess.DEVNULL,
                                      timeout=120, cwd=str(REPO))  # fmt: skip
                assert both.returncode == 1, argv  # nothing can be said; no traceback either (it would be 1 too)


def test_a_full_disk_under_a_file_names_the_file_and_is_no_output_loss() -> None:
    import errno

    from malaunch.sdk.cli.exits import EXIT_OUTPUT, outcome_of

    error = OSError(errno.ENOSPC, "No space left on device", "/jobs/abc/code/model.bin")
    assert outcome_of(error) == (
        "a write to '/jobs/abc/code/model.bin' failed: No space left on device; free space there and run it again",
        EXIT_OUTPUT, None)  # fmt: skip
    assert outcome_of(OSError(errno.EPIPE, "Broken pipe"))[1] == 141


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_stopping_a_running_job_prints_the_same_both_ways(cli_env: Dict[str, str], tmp_path: Path) -> None:
    sleeper = write_job(tmp_path / "sleeper", SLEEPER, name="sleeper")
    running = [ma_submit(["--detach", str(sleeper)], cli_env).stdout.strip() for _ in range(2)]
    for job in running:
        wait_for(lambda job=job: "up" in ma_submit(["logs", job], cli_env).stdout, what=f"job {job}")
    quick = _quick(["stop", running[0]], cli_env)
    through_click = _through_click(["stop", running[1]], cli_env)
    assert quick == (0, f"job {running[0]} STOPPED\n", "")
    assert through_click == (0, f"job {running[1]} STOPPED\n", "")
    for job in running:
        assert_nothing_running(job)


# --- options before the verb (issue 43: ma-submit --profile lab list read 'list' as a job file) -----------------

_LEADING = {"--backend", "--profile", "--output"}


def _leading_forms() -> List[Tuple[List[str], List[str]]]:
    """(the form with its --backend/--profile/--output options before the verb, the recognised form)."""
    pairs: List[Tuple[List[str], List[str]]] = []
    for form in _recognised_forms():
        words, front, rest = form[1:], [], []
        while words:
            word = words.pop(0)
            if word in _LEADING:
                front += [word, words.pop(0)]
            else:
                rest.append(word)
        if front:
            pairs.append(([*front, form[0], *rest], [form[0], *front, *rest]))
    return pairs


def test_the_quick_path_knows_every_verb() -> None:
    assert VERB_NAMES == VERBS


@pytest.mark.parametrize("pair", _leading_forms(), ids=lambda pair: " ".join(pair[0]))
def test_options_before_the_verb_parse_as_after_it_both_ways(pair: Tuple[List[str], List[str]]) -> None:
    before, after = pair
    assert recognise(verb_first(before)) == recognise(after) is not None
    root = click.Context(cli, info_name="ma-submit", **cli.context_settings)
    assert cli.parse_args(root, list(before)) == after[1:]  # the click path takes the verb as its command too


@pytest.mark.parametrize(
    "args",
    [["--name", "list", "job.yaml"], ["--detach", "list"], ["--profile", "lab", "job.yaml"], ["--profile", "lab"],
     ["--profile"], ["--", "list"], ["job.yaml", "--profile", "lab"], ["--help"], ["list", "--profile", "lab"]],
    ids=" ".join,
)  # fmt: skip
def test_other_words_before_a_verb_stay_where_they_are(args: List[str]) -> None:
    assert verb_first(args) == args


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_profile_named_before_the_verb_is_used_both_ways(cli_env: Dict[str, str], tmp_path: Path) -> None:
    """The issue's case: ``ma-submit --profile NAME list`` (kubectl and git take options before the verb)."""
    cli_env = {**cli_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}  # this test's profiles only
    made = ma_submit(["configure", "--profile", "lab", "--backend", "local"], cli_env)
    assert made.returncode == 0, made.stderr
    job = ma_submit(["--profile", "lab", "--detach", str(write_job(tmp_path / "ok", COLOURED, name="ok"))], cli_env)
    assert job.returncode == 0, job.stderr
    wait_for(lambda: not job_processes(job.stdout.strip()), what="the job to end")
    for args in (["--profile", "lab", "list"], ["--profile=lab", "--output", "json", "list"],
                 ["--profile", "lab", "--output", "json", "list"], ["--profile", "lab", "status", job.stdout.strip()]):
        code, out, err = _run([os.path.join(VENV_BIN, "ma-submit"), *args], cli_env)
        assert (code, err) == (0, ""), (args, err)
        assert job.stdout.strip() in out
        if "--output" in args or "status" in args:  # (a text list shows the job's age, which moves on)
            assert _through_click(args, cli_env) == (code, out, err)
    nosuch = _run([os.path.join(VENV_BIN, "ma-submit"), "--profile", "nosuch", "list"], cli_env)
    assert nosuch[0] == 2 and "no profile 'nosuch' (--profile)" in nosuch[2], nosuch
