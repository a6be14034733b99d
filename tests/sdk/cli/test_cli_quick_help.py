"""``ma-submit --help`` (and ``-h``) through the quick path, without click (issue 28), changes nothing a user sees.

(a) The text stored in ``sdk/cli/help_text.py`` is what click renders now at its width, and the file is what the
generator writes for it (a changed verb, option or docstring fails here with the line saying to rerun it).
(b) Real ``ma-submit`` processes print the same bytes and exit with the same code as click's path alone, for no
terminal and ``COLUMNS`` of 80 and 200 (the quick path answers) and of 60 (it declines, click answers), and on a
real terminal of 100 and of 60 columns; (c) a closed pipe ends both ways alike. That the quick path loads no click
is in ``test_cli_imports.py``.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import struct
import subprocess
import sys
import termios
from pathlib import Path
from types import ModuleType
from typing import Dict, List, Optional, Tuple

import pytest
from malaunch.sdk.cli import help_text
from malaunch.sdk.cli.quick import asks_group_help
from sdkutil import REPO, VENV_BIN
from test_cli_quick import _CLICK_ONLY, _into_a_closed_pipe

GENERATOR = REPO / "scripts" / "render_group_help.py"
_RERUN = f"the stored group help is not click's; run: .venv/bin/python {GENERATOR.relative_to(REPO)}"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_group_help", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stored_help_is_what_click_renders_at_its_width() -> None:
    generator = _generator()
    assert help_text.WIDTH == generator.WIDTH
    assert generator.render(help_text.WIDTH) == help_text.GROUP_HELP, _RERUN
    source = Path(help_text.__file__).read_text()
    assert source == generator.module_source(help_text.GROUP_HELP), _RERUN + " (the file was edited by hand)"


def test_the_generator_notices_a_changed_help(monkeypatch: pytest.MonkeyPatch) -> None:
    from malaunch.sdk.cli.app import cli

    generator = _generator()
    monkeypatch.setattr(cli, "help", f"{cli.help} One more sentence.")
    assert generator.render(help_text.WIDTH) != help_text.GROUP_HELP


@pytest.mark.parametrize("columns", [None, "80", "81", "200", "0", "wide"])
def test_the_group_help_alone_is_taken_where_click_renders_the_stored_width(
    columns: Optional[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _set_columns(monkeypatch, columns)
    assert asks_group_help(["--help"]) and asks_group_help(["-h"])
    for args in ([], ["--help", "list"], ["list", "--help"], ["-h", "-h"], ["--help", "--"], ["--HELP"], ["--he"],
                 ["-help"], ["--help="], ["--version"]):  # fmt: skip
        assert not asks_group_help(args), args


@pytest.mark.parametrize("columns", ["79", "60", "1"])
def test_a_narrow_terminal_is_left_to_click(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _set_columns(monkeypatch, columns)
    assert not asks_group_help(["--help"]) and not asks_group_help(["-h"])


def _set_columns(monkeypatch: pytest.MonkeyPatch, columns: Optional[str]) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)


# --- (b) and (c): real processes, the console script against click's path alone ---------------------------------

Run = Tuple[int, str, str]


def _env(cli_env: Dict[str, str], columns: Optional[str]) -> Dict[str, str]:
    env = {key: value for key, value in cli_env.items() if key != "COLUMNS"}
    return env if columns is None else {**env, "COLUMNS": columns}


def _run(argv: List[str], env: Dict[str, str]) -> Run:
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, cwd=str(REPO)
    )
    return done.returncode, done.stdout, done.stderr


def _console(args: List[str]) -> List[str]:
    return [os.path.join(VENV_BIN, "ma-submit"), *args]


def _click_path(args: List[str]) -> List[str]:
    return [sys.executable, "-c", _CLICK_ONLY, *args]


@pytest.mark.parametrize("columns", [None, "80", "200"])
def test_the_help_prints_clicks_bytes_where_the_quick_path_answers(
    columns: Optional[str], cli_env: Dict[str, str]
) -> None:
    env = _env(cli_env, columns)
    for args in (["--help"], ["-h"]):
        quick = _run(_console(args), env)
        assert quick == _run(_click_path(args), env), (args, columns)
        assert quick == (0, help_text.GROUP_HELP + "\n", ""), (args, columns)


def test_on_a_narrow_terminal_click_answers_the_help(cli_env: Dict[str, str]) -> None:
    env = _env(cli_env, "60")
    for args in (["--help"], ["-h"]):
        narrow = _run(_console(args), env)
        assert narrow == _run(_click_path(args), env), args
        assert narrow[0] == 0 and narrow[1] != help_text.GROUP_HELP + "\n", args  # click's own, at its width


@pytest.mark.parametrize("columns", [None, "60"])
def test_a_closed_pipe_ends_the_help_as_it_ends_clicks(columns: Optional[str], cli_env: Dict[str, str]) -> None:
    env = _env(cli_env, columns)
    for args in (["--help"], ["-h"]):
        quick = _into_a_closed_pipe(_console(args), env)
        assert quick == _into_a_closed_pipe(_click_path(args), env) == (1, ""), (args, columns)


def _on_a_terminal(argv: List[str], env: Dict[str, str], columns: int) -> Tuple[int, bytes]:
    """Exit code and every byte ``argv`` writes to stdout, a terminal ``columns`` wide (stderr: its own pipe)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        process = subprocess.Popen(argv, env=env, stdout=slave, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                   cwd=str(REPO))  # fmt: skip
    finally:
        os.close(slave)
    chunks: List[bytes] = []
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child's side closed
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
    return process.wait(timeout=120), b"".join(chunks)


@pytest.mark.parametrize("columns", [100, 60])
def test_on_a_real_terminal_the_help_is_clicks(columns: int, cli_env: Dict[str, str]) -> None:
    env = _env(cli_env, None)
    shown = _on_a_terminal(_console(["--help"]), env, columns)
    assert shown == _on_a_terminal(_click_path(["--help"]), env, columns)
    stored = (help_text.GROUP_HELP + "\n").replace("\n", "\r\n").encode()  # the terminal's own line ends
    assert shown[0] == 0 and (shown[1] == stored) == (columns >= 80), columns
