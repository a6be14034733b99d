"""Every variable the shim reads goes through the contract table's strict parse (issue 18, one table).

Fails on main before this change: ``MALAUNCH_RESTART_BACKOFF`` and ``MALAUNCH_MS_RECOVERY_DELAY`` were read with
``float()``, which takes ``1e3``, ``1_0``, ``.5`` and full-width or Arabic-Indic digits against the docs' rule
(seconds are ``[0-9]+(.[0-9]+)?`` in ASCII); ``MALAUNCH_RESTART_ON``'s exit codes were read with ``int()``.
"""

from __future__ import annotations

from typing import Dict

import pytest
from malaunch.entrypoint import contract
from malaunch.entrypoint.contract import cluster_env
from malaunch.entrypoint.contract.config import DEFAULT_RECOVERY_DELAY, parse_restart_policy, parse_shim_config
from malaunch.entrypoint.contract.errors import ConfigError
from malaunch.entrypoint.main import main
from malaunch.entrypoint.run.policy import DEFAULT_BACKOFF, RESTART_ON_CHOICES

NOT_ASCII_SECONDS = ["1e3", "1E1", "1_0", ".5", "2.", "\uff11\uff10", "\u0661", "inf", "nan", "+1", "-1", "0x10"]
SECONDS_MESSAGE = "expected a finite number of seconds >= 0 in ASCII digits, e.g. 30 or 2.5"


@pytest.mark.parametrize("raw", NOT_ASCII_SECONDS)
def test_restart_backoff_takes_ascii_seconds_only(raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_restart_policy({"MALAUNCH_RESTART_BACKOFF": raw})
    assert caught.value.variable == "MALAUNCH_RESTART_BACKOFF" and SECONDS_MESSAGE in str(caught.value)


@pytest.mark.parametrize("raw", NOT_ASCII_SECONDS)
def test_ms_recovery_delay_takes_ascii_seconds_only(raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_shim_config({"MALAUNCH_MS_RECOVERY_DELAY": raw})
    assert caught.value.variable == "MALAUNCH_MS_RECOVERY_DELAY" and SECONDS_MESSAGE in str(caught.value)


@pytest.mark.parametrize("name", ["MALAUNCH_RESTART_BACKOFF", "MALAUNCH_MS_RECOVERY_DELAY"])
@pytest.mark.parametrize(("raw", "value"), [("0", 0.0), ("2.5", 2.5), (" 30 ", 30.0), ("3600", 3600.0)])
def test_plain_seconds_still_read(name: str, raw: str, value: float) -> None:
    config = parse_shim_config({name: raw})
    read = config.policy.backoff if name.endswith("BACKOFF") else config.recovery.delay
    assert read == value


@pytest.mark.parametrize("name", ["MALAUNCH_RESTART_BACKOFF", "MALAUNCH_MS_RECOVERY_DELAY"])
def test_seconds_above_the_tables_maximum_keep_their_message(name: str) -> None:
    with pytest.raises(ConfigError, match=r"expected seconds between 0 and 3600"):
        contract.parse_seconds({name: "3600.5"}, name)


def test_defaults_and_choices_are_the_tables() -> None:
    assert contract.VARIABLES["MALAUNCH_RESTART_BACKOFF"].default == DEFAULT_BACKOFF
    default = contract.VARIABLES["MALAUNCH_MS_RECOVERY_DELAY"].default
    assert DEFAULT_RECOVERY_DELAY == default == parse_shim_config({}).recovery.delay
    assert contract.VARIABLES["MALAUNCH_RESTART_ON"].choices == RESTART_ON_CHOICES
    assert contract.VARIABLES["MA_RUN_METHOD"].choices == cluster_env.RUN_METHODS
    assert contract.VARIABLES["MA_NUM_HOSTS"].maximum == cluster_env.MAX_NUM_HOSTS
    assert contract.VARIABLES["MA_NUM_GPUS"].maximum == cluster_env.MAX_NUM_GPUS
    assert contract.VARIABLES["MALAUNCH_GRACE_PERIOD"].default == cluster_env.DEFAULT_GRACE_PERIOD


@pytest.mark.parametrize("raw", ["\uff11\uff13\uff17", "1,\u0661", "1_0", "1,+3"])
def test_restart_on_codes_are_ascii_digits(raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_restart_policy({"MALAUNCH_RESTART_ON": raw})
    assert str(caught.value).endswith("expected retryable, always, never or comma-separated exit codes (1,137)")


@pytest.mark.parametrize(("raw", "expected"), [("Never", "never"), ("1, 137", (1, 137)), ("", "retryable")])
def test_restart_on_values(raw: str, expected: object) -> None:
    assert parse_restart_policy({"MALAUNCH_RESTART_ON": raw}).restart_on == expected


@pytest.mark.parametrize("raw", ["0", "-3", "1,256"])
def test_restart_on_codes_out_of_range_keep_their_message(raw: str) -> None:
    with pytest.raises(ConfigError, match="expected exit codes between 1 and 255"):
        parse_restart_policy({"MALAUNCH_RESTART_ON": raw})


@pytest.mark.parametrize(
    ("name", "raw"), [("MALAUNCH_RESTART_BACKOFF", "1e3"), ("MALAUNCH_MS_RECOVERY_DELAY", "\uff15")]
)
def test_the_shim_exits_2_before_starting_anything(
    name: str, raw: str, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    env: Dict[str, str] = {"MA_RUN_METHOD": "msrun", "MS_ENABLE_RECOVERY": "1", name: raw,
                           "MALAUNCH_LOG_DIR": str(tmp_path)}  # fmt: skip
    assert main(["--dry-run", "train.py"], env) == 2
    assert f"{name}=" in capsys.readouterr().err


def test_the_names_the_sdk_imports_are_rows_of_the_table() -> None:
    names = [name for name in vars(contract.Name) if not name.startswith("_")]
    assert "MA_NUM_HOSTS" in names and len(names) >= 16
    for name in names:
        assert getattr(contract.Name, name) == name and name in contract.VARIABLES
